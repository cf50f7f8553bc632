/*
 * emu_driver.h: the C API of the emulated accelerator runtime ("emu").
 *
 * It stands in for a vendor SDK (CUDA runtime, AscendCL): the PyTorch plugin
 * talks to the device only through these functions, so a real SDK can take
 * its place. Device memory lives in an address range the host cannot read:
 * dereferencing a device pointer from host code faults at once. Kernels are
 * host functions queued on a stream; inside a kernel, and only there,
 * emuKernelTranslate gives the kernel's view of device memory.
 *
 * API versions: the library is built at one API version, written into
 * emu_driver_version.h at build time. The header and the library agree:
 *   1.x  devices, memory, synchronous copies, streams that run work at once
 *        on the caller's thread; no events, no asynchronous copies.
 *   2.x  adds asynchronous streams (one worker thread per stream, in-order),
 *        asynchronous copies and memsets, and events with timing.
 *   2.2  adds page-locked ("pinned") host memory: emuHostAlloc, emuFreeHost,
 *        emuHostGetFlags; emuPointerGetAttributes reports it, and asynchronous
 *        copies treat pinned and pageable host memory as CUDA does.
 *   2.3  adds the interconnect: communicators between the processes of one
 *        host over shared memory (as NCCL's SHM transport), whose collectives
 *        and point-to-point transfers are work queued on an emu stream; and
 *        stream capture: work queued on a capturing stream is recorded into a
 *        graph instead of run, and an instantiated graph replays it.
 *   2.4  adds activity tracing: each kernel, copy, memset and collective a
 *        stream runs is recorded with its start and end, for profilers (as
 *        CUPTI does for CUDA).
 * Symbols of a newer API are absent from a library built at an older one.
 */
#ifndef EMU_DRIVER_H_
#define EMU_DRIVER_H_

#include <stddef.h>
#include <stdint.h>

#include "emu_driver_version.h" /* EMU_DRIVER_VERSION_MAJOR, _MINOR, EMU_DRIVER_VERSION */

#ifdef __cplusplus
extern "C" {
#endif

#define EMU_API __attribute__((visibility("default")))

/* EMU_DRIVER_VERSION is major * 1000 + minor, e.g. 2002 for 2.2. */
#define EMU_DRIVER_HAS_ASYNC (EMU_DRIVER_VERSION_MAJOR >= 2)
#define EMU_DRIVER_HAS_EVENTS (EMU_DRIVER_VERSION_MAJOR >= 2)
#define EMU_DRIVER_HAS_HOST_ALLOC (EMU_DRIVER_VERSION >= 2002)
#define EMU_DRIVER_HAS_COMM (EMU_DRIVER_VERSION >= 2003)
#define EMU_DRIVER_HAS_GRAPHS (EMU_DRIVER_VERSION >= 2003)
#define EMU_DRIVER_HAS_TRACING (EMU_DRIVER_VERSION >= 2004)

typedef enum emuError_t {
  emuSuccess = 0,
  emuErrorInvalidValue = 1, /* a bad argument (null out-pointer, bad kind, ...) */
  emuErrorMemoryAllocation = 2, /* device memory exhausted */
  emuErrorInvalidDevice = 3, /* device index out of range */
  emuErrorInvalidDevicePointer = 4, /* not inside a live device allocation, or range overruns it */
  emuErrorInvalidResourceHandle = 5, /* unknown or destroyed stream or event */
  emuErrorNotReady = 6, /* query: work still pending */
  emuErrorNotPermitted = 7, /* e.g. emuKernelTranslate outside a kernel */
  emuErrorLaunchFailure = 8, /* a kernel returned non-zero; sticky on its stream until synchronized */
  emuErrorInitialization = 9, /* the runtime could not reserve its address ranges */
#if EMU_DRIVER_VERSION >= 2003
  emuErrorCommFailure = 10, /* API 2.3: a peer died, timed out, aborted, or disagreed on a collective */
  emuErrorStreamCaptureUnsupported = 11, /* API 2.3: not allowed while a stream (of the device) captures */
  emuErrorStreamCaptureInvalidated = 12, /* API 2.3: the capture was spoilt by a call that was not allowed */
#endif
} emuError_t;

EMU_API const char* emuGetErrorName(emuError_t error);
EMU_API const char* emuGetErrorString(emuError_t error);
/* Details of the last error on this thread (which pointer, which sizes), or "". */
EMU_API const char* emuGetLastErrorMessage(void);

/* ---- version ------------------------------------------------------------ */
/* The API version the library was built at (major * 1000 + minor). */
EMU_API emuError_t emuDriverGetVersion(int* version);

/* ---- devices ------------------------------------------------------------ */
/* Device count comes from EMU_DEVICE_COUNT (default 2, 1..EMU_MAX_DEVICES); memory
 * per device from EMU_DEVICE_MEMORY_MB (default 4096). Read once, at first use. */

/* The most devices a runtime can have, so the bound of every device index. Public
 * so that code above the driver (the torch plugin) sizes its per-device tables with
 * the driver's own limit, as c10 does with C10_COMPILE_TIME_MAX_GPUS for CUDA,
 * instead of repeating the number and drifting from it. */
#define EMU_MAX_DEVICES 16

typedef struct emuDeviceProp {
  char name[64]; /* "Emu Accelerator E2 (API 2.2)" */
  size_t totalGlobalMem; /* bytes */
  int major; /* API version of the driver */
  int minor;
  int multiProcessorCount;
} emuDeviceProp;

EMU_API emuError_t emuGetDeviceCount(int* count);
EMU_API emuError_t emuSetDevice(int device); /* per host thread, like CUDA */
EMU_API emuError_t emuGetDevice(int* device);
EMU_API emuError_t emuGetDeviceProperties(emuDeviceProp* prop, int device);
EMU_API emuError_t emuMemGetInfo(size_t* free_bytes, size_t* total_bytes); /* current device */
EMU_API emuError_t emuDeviceSynchronize(void); /* waits for every stream of the current device */

/* ---- memory ------------------------------------------------------------- */
typedef enum emuMemcpyKind {
  emuMemcpyHostToHost = 0,
  emuMemcpyHostToDevice = 1,
  emuMemcpyDeviceToHost = 2,
  emuMemcpyDeviceToDevice = 3, /* also across devices */
} emuMemcpyKind;

typedef enum emuMemoryType {
  emuMemoryTypeHost = 0, /* pageable host memory: anything the driver did not allocate */
  emuMemoryTypeDevice = 1,
#if EMU_DRIVER_HAS_HOST_ALLOC
  emuMemoryTypePinnedHost = 2, /* inside a live emuHostAlloc allocation (API 2.2) */
#endif
} emuMemoryType;

typedef struct emuPointerAttributes {
  emuMemoryType type;
  int device; /* -1 for host memory */
  void* basePtr; /* start of the live allocation holding the pointer (device or pinned host) */
  size_t size; /* size of that allocation as asked for */
} emuPointerAttributes;

/* Allocations are 256-byte aligned; size 0 gives a null pointer and success. */
EMU_API emuError_t emuMalloc(void** devPtr, size_t size); /* on the current device */
EMU_API emuError_t emuFree(void* devPtr); /* null is a no-op; waits for the device */
EMU_API emuError_t emuPointerGetAttributes(emuPointerAttributes* attr, const void* ptr);

/* Synchronous: ordered after all work queued on any stream of the devices
 * involved, and complete when the call returns. Every device range is checked
 * against the live allocations; a host range must not be device memory. */
EMU_API emuError_t emuMemcpy(void* dst, const void* src, size_t count, emuMemcpyKind kind);
EMU_API emuError_t emuMemset(void* devPtr, int value, size_t count);

/* ---- streams ------------------------------------------------------------ */
/* A null emuStream_t is the default stream of the current device. API 2.x: work queued on a
 * created stream starts only after the work queued before it on its device's default stream (as
 * CUDA's blocking streams after the legacy default stream); the default stream does not wait for
 * created streams. */
typedef struct emuStream_st* emuStream_t;

EMU_API emuError_t emuStreamCreate(emuStream_t* stream); /* on the current device */
EMU_API emuError_t emuStreamDestroy(emuStream_t stream); /* waits for its work first */
EMU_API emuError_t emuStreamSynchronize(emuStream_t stream);
EMU_API emuError_t emuStreamQuery(emuStream_t stream); /* emuSuccess or emuErrorNotReady */
EMU_API emuError_t emuStreamGetDevice(emuStream_t stream, int* device);

/* ---- kernels ------------------------------------------------------------ */
/* A kernel is a host function run by the stream's executor (API 1.x: at once
 * on the calling thread, before emuLaunchKernel returns; API 2.x: later, on
 * the stream's worker thread, in queue order). A non-zero return marks the
 * stream failed with emuErrorLaunchFailure; the failure is reported (and
 * cleared) by the next synchronize or query of that stream. The driver never
 * frees args: the kernel owns it. */
typedef int (*emuKernelFn)(void* args);
EMU_API emuError_t emuLaunchKernel(emuKernelFn fn, void* args, emuStream_t stream);

/* Only inside a running kernel: the kernel's view of a device pointer.
 * Checks that [devPtr, devPtr + bytes) is inside one live allocation. */
EMU_API emuError_t emuKernelTranslate(const void* devPtr, size_t bytes, void** kernelPtr);
/* A kernel can leave a message that the failing synchronize reports. */
EMU_API void emuKernelSetErrorMessage(const char* message);

#if EMU_DRIVER_HAS_ASYNC
/* ---- asynchronous copies (API 2.x) -------------------------------------- */
/* Queued on the stream. API 2.0/2.1: a host buffer must stay valid until the stream reaches the copy.
 * From API 2.2, as with CUDA: a host range inside pinned memory (emuHostAlloc) is copied when the
 * stream reaches the copy and the call returns at once; a pageable source is first staged (copied
 * into driver memory before the call returns, so the caller may reuse it); a pageable destination
 * makes the call wait until the copy is done (and so report earlier failures of the stream). */
EMU_API emuError_t emuMemcpyAsync(void* dst, const void* src, size_t count, emuMemcpyKind kind, emuStream_t stream);
EMU_API emuError_t emuMemsetAsync(void* devPtr, int value, size_t count, emuStream_t stream);
#endif

#if EMU_DRIVER_HAS_EVENTS
/* ---- events (API 2.x) --------------------------------------------------- */
typedef struct emuEvent_st* emuEvent_t;
#define emuEventDefault 0x0
#define emuEventDisableTiming 0x2
EMU_API emuError_t emuEventCreateWithFlags(emuEvent_t* event, unsigned int flags);
EMU_API emuError_t emuEventDestroy(emuEvent_t event);
EMU_API emuError_t emuEventRecord(emuEvent_t event, emuStream_t stream);
EMU_API emuError_t emuEventQuery(emuEvent_t event); /* emuSuccess, or emuErrorNotReady */
EMU_API emuError_t emuEventSynchronize(emuEvent_t event);
/* Makes future work on stream wait until the event's recorded work is done. */
EMU_API emuError_t emuStreamWaitEvent(emuStream_t stream, emuEvent_t event);
/* Milliseconds between two completed events recorded with timing. */
EMU_API emuError_t emuEventElapsedTime(float* ms, emuEvent_t start, emuEvent_t end);
#endif

#if EMU_DRIVER_HAS_HOST_ALLOC
/* ---- page-locked host memory (API 2.2) ---------------------------------- */
/* Page-aligned host memory registered with the driver, like cudaHostAlloc. The driver asks the
 * kernel to lock its pages (mlock) but does not fail when it cannot (RLIMIT_MEMLOCK too low,
 * no CAP_IPC_LOCK): the memory is still pinned for the driver (asynchronous copies, pointer
 * attributes), and emuHostGetFlags says whether the pages are really locked. Size 0 gives a
 * null pointer and success. */
#define emuHostAllocDefault 0x0
#define emuHostAllocPortable 0x1 /* accepted for CUDA parity: every allocation serves every device */
#define emuHostAllocLocked 0x100 /* reported by emuHostGetFlags only: mlock succeeded */
EMU_API emuError_t emuHostAlloc(void** ptr, size_t size, unsigned int flags);
/* Null is a no-op. Waits until the queued copies that use the allocation have run (never call it
 * from a kernel that such a copy is queued behind); ptr must be the start of the allocation. */
EMU_API emuError_t emuFreeHost(void* ptr);
/* The flags of the allocation holding ptr, plus emuHostAllocLocked when its pages are locked. */
EMU_API emuError_t emuHostGetFlags(unsigned int* flags, void* ptr);
#endif

#if EMU_DRIVER_HAS_COMM
/* ---- interconnect: communicators between processes (API 2.3) ----------- */
/* A communicator joins nranks processes of one host, each using one device, over a shared-memory
 * segment (the way NCCL's SHM transport works). As with NCCL: one rank makes a unique id, the job
 * shares its bytes out of band (a key-value store), and every rank calls emuCommInitRank with it;
 * init returns once all ranks have joined, or fails when timeout_ms passes first.
 * Every transfer is work queued on an emu stream: the call checks its buffers (live device memory
 * of the communicator's device), queues the transfer and returns at once; the stream runs it in
 * order with its other work. Ranks must issue the same collectives in the same order. A failure
 * (a peer process that exited, a peer that does not arrive within timeout_ms, a peer that called
 * emuCommAbort, or ranks that disagree on a collective's kind, count, type, operator or root) fails
 * the transfer on every rank: the stream reports emuErrorLaunchFailure with the reason at its next
 * synchronize, and later transfers of the communicator fail at once with emuErrorCommFailure. */
typedef struct emuComm_st* emuComm_t;
#define EMU_COMM_UNIQUE_ID_BYTES 128
typedef struct emuCommUniqueId {
  char internal[EMU_COMM_UNIQUE_ID_BYTES];
} emuCommUniqueId;

typedef enum emuDataType {
  emuInt8 = 0,
  emuUint8 = 1,
  emuInt32 = 2,
  emuInt64 = 3,
  emuFloat16 = 4,
  emuFloat32 = 5,
  emuFloat64 = 6,
  emuBfloat16 = 7,
  emuBool = 8, /* reductions: sum and max are "or", product and min are "and" */
  emuInt16 = 9,
} emuDataType;

typedef enum emuRedOp {
  emuSum = 0,
  emuProd = 1,
  emuMax = 2,
  emuMin = 3,
  emuAvg = 4, /* sum divided by nranks (integer types: truncated) */
} emuRedOp;

EMU_API emuError_t emuCommGetUniqueId(emuCommUniqueId* id);
/* Joins the communicator on the current device. timeout_ms bounds init and every later wait for a peer. */
EMU_API emuError_t emuCommInitRank(emuComm_t* comm, int nranks, emuCommUniqueId id, int rank, unsigned timeout_ms);
/* Waits for the communicator's queued transfers, then leaves it (peers waiting on this rank then fail). */
EMU_API emuError_t emuCommDestroy(emuComm_t comm);
/* Makes every rank's pending and later transfers fail now (a job that gives up on a hung peer). */
EMU_API emuError_t emuCommAbort(emuComm_t comm);
EMU_API emuError_t emuCommCount(emuComm_t comm, int* nranks);
EMU_API emuError_t emuCommUserRank(emuComm_t comm, int* rank);
EMU_API emuError_t emuCommDevice(emuComm_t comm, int* device);
/* The first failure of the communicator (sticky: the reason its transfers fail), or "" while it is healthy. */
EMU_API const char* emuCommGetFailure(emuComm_t comm);

/* Counts are in elements of datatype. sendbuf may equal recvbuf (in place) for every collective. */
EMU_API emuError_t emuCommAllReduce(
    const void* sendbuf,
    void* recvbuf,
    size_t count,
    emuDataType datatype,
    emuRedOp op,
    emuComm_t comm,
    emuStream_t stream);
/* recvbuf on the root is the result; elsewhere it is not written (may be null). */
EMU_API emuError_t emuCommReduce(
    const void* sendbuf,
    void* recvbuf,
    size_t count,
    emuDataType datatype,
    emuRedOp op,
    int root,
    emuComm_t comm,
    emuStream_t stream);
/* sendbuf is read on the root only; every rank's recvbuf gets it. */
EMU_API emuError_t emuCommBroadcast(
    const void* sendbuf,
    void* recvbuf,
    size_t count,
    emuDataType datatype,
    int root,
    emuComm_t comm,
    emuStream_t stream);
/* recvbuf holds nranks * sendcount elements, rank r's at offset r * sendcount. */
EMU_API emuError_t emuCommAllGather(
    const void* sendbuf,
    void* recvbuf,
    size_t sendcount,
    emuDataType datatype,
    emuComm_t comm,
    emuStream_t stream);
/* sendbuf holds nranks * recvcount elements; rank r gets the reduction of every rank's block r. */
EMU_API emuError_t emuCommReduceScatter(
    const void* sendbuf,
    void* recvbuf,
    size_t recvcount,
    emuDataType datatype,
    emuRedOp op,
    emuComm_t comm,
    emuStream_t stream);
/* Point to point. Between emuCommGroupStart and emuCommGroupEnd (per host thread) sends and receives are
 * collected and queued as one transfer that progresses them together, so exchanges such as all-to-all
 * never deadlock; every call of a group must name the same communicator and stream. Outside a group each
 * call is a group of one. A receive must name the count its sender sends. */
EMU_API emuError_t
emuCommSend(const void* sendbuf, size_t count, emuDataType datatype, int peer, emuComm_t comm, emuStream_t stream);
EMU_API emuError_t
emuCommRecv(void* recvbuf, size_t count, emuDataType datatype, int peer, emuComm_t comm, emuStream_t stream);
EMU_API emuError_t emuCommGroupStart(void);
EMU_API emuError_t emuCommGroupEnd(void);
#endif

#if EMU_DRIVER_HAS_GRAPHS
/* ---- stream capture and graphs (API 2.3) -------------------------------- */
/* Between emuStreamBeginCapture and emuStreamEndCapture, work queued on a created stream (not the default
 * stream) is recorded, not run: kernels launched with emuLaunchKernelRetained, device-to-device and memset
 * copies, event records and waits, and launches of other graphs. The graph replays that work in the same
 * order, with the same arguments and device addresses, each time an instance of it is launched (as
 * cudaStreamBeginCapture, cudaGraphInstantiate and cudaGraphLaunch do).
 * While any stream of a device captures, a call that waits for the device or for the capturing stream
 * (emuStreamSynchronize, emuStreamQuery, emuDeviceSynchronize, emuMemcpy, emuMemset, emuFree) and work that
 * cannot be replayed (emuLaunchKernel, whose kernel frees its arguments; a copy from or to host memory;
 * collectives) fail at the call with emuErrorStreamCaptureUnsupported and invalidate the capture: later
 * captured calls fail with emuErrorStreamCaptureInvalidated, and emuStreamEndCapture ends the capture with
 * that error and the reason, giving no graph. The stream is usable again once the capture has ended.
 * Events: a captured record takes a fresh generation at each launch, and a captured wait waits for the
 * event's latest record at that launch. Only the capturing stream records: other streams do not join the
 * capture (no fork and join across streams). */
typedef struct emuGraph_st* emuGraph_t;
typedef struct emuGraphExec_st* emuGraphExec_t;

/* A kernel the driver may run many times: fn(args) at each run, release(args) (if not null) once the
 * driver will not run it again (after its run, or when the last graph and instance recording it are
 * destroyed). Usable with or without capture. */
typedef void (*emuKernelReleaseFn)(void* args);
EMU_API emuError_t emuLaunchKernelRetained(emuKernelFn fn, void* args, emuKernelReleaseFn release, emuStream_t stream);

EMU_API emuError_t emuStreamBeginCapture(emuStream_t stream);
/* Ends the capture; *graph is the recorded work (null when the capture was invalidated). */
EMU_API emuError_t emuStreamEndCapture(emuStream_t stream, emuGraph_t* graph);
/* *capturing is 1 while the stream captures (also after the capture was invalidated), else 0. */
EMU_API emuError_t emuStreamIsCapturing(emuStream_t stream, int* capturing);
EMU_API emuError_t emuGraphGetNodeCount(emuGraph_t graph, size_t* count);
EMU_API emuError_t emuGraphInstantiate(emuGraphExec_t* exec, emuGraph_t graph);
/* Queues the graph's work on stream (of the device it was captured on), in order after the stream's work. */
EMU_API emuError_t emuGraphLaunch(emuGraphExec_t exec, emuStream_t stream);
/* Destroying a graph or an instance never waits: queued replays keep what they need. */
EMU_API emuError_t emuGraphExecDestroy(emuGraphExec_t exec);
EMU_API emuError_t emuGraphDestroy(emuGraph_t graph);
#endif

#if EMU_DRIVER_HAS_TRACING
/* ---- activity tracing (API 2.4) ------------------------------------------ */
/* While tracing is on, every piece of work a stream of any device runs (a kernel, a copy, a memset, a collective
 * or point-to-point transfer, a replayed graph's node) is recorded when it ends: what it was, where it ran, the
 * queuing host thread's correlation id, and when it was queued, started and ended (CLOCK_REALTIME nanoseconds,
 * the clock PyTorch's profiler uses). Event records and waits are not recorded. Work queued before
 * emuTraceStart is not recorded, work queued before emuTraceStop is. Records wait in the driver until read;
 * past EMU_TRACE_CAPACITY unread records, further ones are counted as dropped instead. */
#define EMU_TRACE_CAPACITY (1u << 20)
#define EMU_TRACE_NAME_LENGTH 128

typedef enum emuActivityKind {
  emuActivityKernel = 1,
  emuActivityMemcpy = 2, /* name: "Memcpy HtoD", "Memcpy DtoH", "Memcpy DtoD" or "Memcpy HtoH" */
  emuActivityMemset = 3, /* name: "Memset" */
  emuActivityCollective = 4, /* name: "eccl " and the call, e.g. "eccl AllReduce" */
} emuActivityKind;

typedef struct emuActivityRecord {
  emuActivityKind kind;
  int device;
  uint64_t stream; /* the stream's number on its device: 0 is the default stream, created streams count from 1 */
  uint64_t correlation; /* the queuing thread's innermost emuTracePushCorrelation id, 0 if it had none */
  int64_t queued_ns;
  int64_t start_ns;
  int64_t end_ns;
  char name[EMU_TRACE_NAME_LENGTH]; /* a kernel's label (emuTraceLabel) or "kernel"; NUL-terminated, truncated */
} emuActivityRecord;

EMU_API emuError_t emuTraceStart(void);
EMU_API emuError_t emuTraceStop(void);
EMU_API int emuTraceIsOn(void); /* 1 while tracing is on, else 0: cheap enough to ask before each launch */
/* Per host thread: the name of the next kernel this thread launches (then cleared; null clears it now). */
EMU_API emuError_t emuTraceLabel(const char* name);
/* Per host thread: work this thread queues carries the innermost id (as CUPTI's external correlation ids). */
EMU_API emuError_t emuTracePushCorrelation(uint64_t id);
EMU_API emuError_t emuTracePopCorrelation(void); /* emuErrorInvalidValue if the thread has none pushed */
/* Moves up to capacity recorded activities, oldest first, into records; *count is how many. *dropped (if not
 * null) is how many were dropped since the previous read (the buffer was full). */
EMU_API emuError_t emuTraceRead(emuActivityRecord* records, size_t capacity, size_t* count, uint64_t* dropped);
#endif

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* EMU_DRIVER_H_ */
