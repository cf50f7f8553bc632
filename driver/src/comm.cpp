// The interconnect (API 2.3): communicators between the processes of one host over a POSIX shared-memory
// segment, as NCCL's SHM transport does. Each transfer is a task on an emu stream; the stream's worker moves
// the bytes through the segment and waits on its peers there, so the caller never blocks.
#include "comm_internal.h"

#if EMU_DRIVER_HAS_COMM

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <random>
#include <unordered_set>

namespace emu {
namespace {

using comm::elem_size;

size_t round_page(size_t n) {
  return (n + kPage - 1) / kPage * kPage;
}

struct Layout {
  size_t ctl, mail, slots, mailboxes, total;
  explicit Layout(int n) {
    const size_t un = size_t(n);
    ctl = round_page(sizeof(Header));
    mail = ctl + round_page(sizeof(RankCtl) * un);
    slots = mail + round_page(sizeof(MailCtl) * un * un);
    mailboxes = slots + 2 * un * kSlotBytes;
    total = mailboxes + un * un * kMailBytes;
  }
};

} // namespace

namespace {

std::mutex g_comms_mu;
std::unordered_set<Comm*>& live_comms() {
  static auto* comms = new std::unordered_set<Comm*>();
  return *comms;
}

Comm* find_comm(emuComm_t handle, emuError_t* error) {
  auto* c = reinterpret_cast<Comm*>(handle);
  std::lock_guard<std::mutex> lock(g_comms_mu);
  if (c == nullptr || live_comms().count(c) == 0) {
    *error = fail(emuErrorInvalidResourceHandle, "unknown or destroyed communicator");
    return nullptr;
  }
  return c;
}

// ---- queueing ----
// Runs work on the stream in the communicator's queue order; a failed communicator fails the task at once.
emuError_t enqueue(Comm* c, Stream* s, const char* name, std::function<bool()> work) {
  // Refused before a ticket is taken: a ticket that never runs would stall the communicator's later transfers.
  if (emuError_t refused = refuse_while_capturing(s, "a collective or point-to-point transfer"))
    return refused;
  uint64_t ticket;
  {
    std::lock_guard<std::mutex> lock(c->mu);
    if (!c->failure.empty())
      return fail(emuErrorCommFailure, c->failure);
    ticket = c->tickets++;
    ++c->pending;
  }
#if EMU_DRIVER_HAS_TRACING
  TracedAs traced(emuActivityCollective, name);
#else
  (void)name;
#endif
  return submit(s, [c, ticket, work = std::move(work)] {
    {
      std::unique_lock<std::mutex> lock(c->mu);
      c->cv.wait(lock, [c, ticket] { return c->next_run == ticket; });
    }
    bool ok = failure_of(c).empty() && work();
    std::string message = failure_of(c);
    {
      std::lock_guard<std::mutex> lock(c->mu);
      ++c->next_run;
      --c->pending;
    }
    c->cv.notify_all();
    if (ok)
      return 0;
    emuKernelSetErrorMessage(message.c_str());
    return 1;
  });
}

struct Checked {
  Comm* comm = nullptr;
  Stream* stream = nullptr;
};

emuError_t check_call(emuComm_t handle, emuStream_t stream, emuDataType type, Checked* out) {
  EMU_RUNTIME(rt);
  emuError_t err = emuSuccess;
  Comm* c = find_comm(handle, &err);
  if (c == nullptr)
    return err;
  if (elem_size(type) == 0)
    return fail(emuErrorInvalidValue, "unknown emuDataType " + std::to_string(int(type)));
  Stream* s = resolve_stream(rt, stream, &err);
  if (s == nullptr)
    return err;
  if (s->device->index != c->device)
    return fail(
        emuErrorInvalidValue,
        "the stream is on device " + std::to_string(s->device->index) + ", the communicator on device " +
            std::to_string(c->device));
  *out = Checked{c, s};
  return emuSuccess;
}

// A device buffer of the communicator's device: its host-side address (null for a null, empty buffer).
emuError_t buffer(Comm* c, const void* p, size_t bytes, const char* what, char** host) {
  *host = nullptr;
  if (bytes == 0)
    return emuSuccess;
  EMU_RUNTIME(rt);
  Device* d = nullptr;
  emuError_t err = translate(rt, p, bytes, what, host, &d);
  if (err != emuSuccess)
    return err;
  if (d->index != c->device)
    return fail(
        emuErrorInvalidValue,
        std::string(what) + " is on device " + std::to_string(d->index) + ", the communicator on device " +
            std::to_string(c->device));
  return emuSuccess;
}

// Checks and queues one collective of count elements per rank block; the bytes each buffer must hold follow from the
// kind, this rank and the group size (the root alone receives a reduce and sends a broadcast).
emuError_t collective(
    emuComm_t handle,
    emuStream_t stream,
    Kind kind,
    const void* send,
    void* recv,
    size_t count,
    emuDataType type,
    emuRedOp op,
    int root) {
  Checked k;
  emuError_t err = check_call(handle, stream, type, &k);
  if (err != emuSuccess)
    return err;
  Comm* c = k.comm;
  if (op < emuSum || op > emuAvg)
    return fail(emuErrorInvalidValue, "unknown emuRedOp " + std::to_string(int(op)));
  if ((kind == kReduce || kind == kBroadcast) && (root < 0 || root >= c->nranks))
    return fail(
        emuErrorInvalidValue, "root " + std::to_string(root) + " is not a rank of " + std::to_string(c->nranks));
  const size_t bytes = count * elem_size(type), all = bytes * size_t(c->nranks);
  size_t send_bytes = bytes, recv_bytes = bytes;
  if (kind == kReduce)
    recv_bytes = c->rank == root ? bytes : 0;
  else if (kind == kBroadcast)
    send_bytes = c->rank == root ? bytes : 0;
  else if (kind == kAllGather)
    recv_bytes = all;
  else if (kind == kReduceScatter)
    send_bytes = all;
  char *s = nullptr, *r = nullptr;
  if ((err = buffer(c, send, send_bytes, "sendbuf", &s)) || (err = buffer(c, recv, recv_bytes, "recvbuf", &r)))
    return err;
  Collective x{Desc{uint32_t(kind), uint32_t(type), uint32_t(op), root, uint64_t(count), 0}, type, op, s, r};
  static const char* const names[] = {
      "eccl Barrier", "eccl AllReduce", "eccl Reduce", "eccl Broadcast", "eccl AllGather", "eccl ReduceScatter"};
  return enqueue(c, k.stream, names[kind - kBarrier], [c, x]() mutable {
    x.desc.seq = c->seq++;
    return run_collective(c, x);
  });
}

struct Group {
  int depth = 0;
  emuComm_t comm = nullptr;
  emuStream_t stream = nullptr;
  std::vector<P2P> ops;
};

Group& group() {
  thread_local Group g;
  return g;
}

emuError_t flush_group(Group& g) {
  std::vector<P2P> ops = std::move(g.ops);
  g.ops.clear();
  if (ops.empty())
    return emuSuccess;
  Checked k;
  emuError_t err = check_call(g.comm, g.stream, emuUint8, &k);
  if (err != emuSuccess)
    return err;
  return enqueue(k.comm, k.stream, "eccl SendRecv", [c = k.comm, ops]() mutable { return run_p2p(c, ops); });
}

emuError_t point_to_point(
    bool send,
    const void* buf,
    size_t count,
    emuDataType type,
    int peer,
    emuComm_t handle,
    emuStream_t stream) {
  Checked k;
  emuError_t err = check_call(handle, stream, type, &k);
  if (err != emuSuccess)
    return err;
  Comm* c = k.comm;
  if (peer < 0 || peer >= c->nranks || peer == c->rank)
    return fail(
        emuErrorInvalidValue,
        "peer " + std::to_string(peer) + " is not another rank of " + std::to_string(c->nranks) + " (this is rank " +
            std::to_string(c->rank) + ")");
  const size_t bytes = count * elem_size(type);
  char* host = nullptr;
  if ((err = buffer(c, buf, bytes, send ? "sendbuf" : "recvbuf", &host)))
    return err;
  Group& g = group();
  if (!g.ops.empty() && (g.comm != handle || g.stream != stream))
    return fail(emuErrorInvalidValue, "every send and recv of a group must use one communicator and one stream");
  g.comm = handle;
  g.stream = stream;
  g.ops.push_back(P2P{send, host, bytes, peer});
  return g.depth == 0 ? flush_group(g) : emuSuccess;
}

std::string random_hex() {
  std::random_device rd;
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%08x%08x", rd(), rd());
  return buf;
}

void unmap(Comm* c) {
  if (c->base != nullptr)
    munmap(c->base, c->bytes);
  c->base = nullptr;
}

} // namespace
} // namespace emu

using emu::fail;

extern "C" {

emuError_t emuCommGetUniqueId(emuCommUniqueId* id) {
  if (id == nullptr)
    return fail(emuErrorInvalidValue, "id is null");
  static std::atomic<unsigned> counter{0};
  std::memset(id, 0, sizeof(*id));
  std::snprintf(
      id->internal, sizeof(id->internal), "/emu-comm-%d-%u-%s", int(getpid()), counter++, emu::random_hex().c_str());
  return emuSuccess;
}

emuError_t emuCommInitRank(emuComm_t* comm, int nranks, emuCommUniqueId id, int rank, unsigned timeout_ms) {
  if (comm == nullptr)
    return fail(emuErrorInvalidValue, "comm is null");
  if (nranks < 1 || nranks > emu::kMaxRanks)
    return fail(
        emuErrorInvalidValue, "nranks " + std::to_string(nranks) + " is not in 1.." + std::to_string(emu::kMaxRanks));
  if (rank < 0 || rank >= nranks)
    return fail(emuErrorInvalidValue, "rank " + std::to_string(rank) + " is not in 0.." + std::to_string(nranks - 1));
  const std::string name(id.internal, strnlen(id.internal, sizeof(id.internal)));
  if (name.rfind("/emu-comm-", 0) != 0 || name.size() >= sizeof(id.internal))
    return fail(emuErrorInvalidValue, "the unique id was not made by emuCommGetUniqueId");
  EMU_RUNTIME(rt);
  const emu::Layout layout(nranks);
  const auto deadline = emu::Clock::now() + std::chrono::milliseconds(timeout_ms);
  int fd = -1;
  if (rank == 0) {
    fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0)
      return fail(emuErrorCommFailure, "shm_open(" + name + "): " + std::strerror(errno));
    if (ftruncate(fd, off_t(layout.total)) != 0) {
      const std::string why = std::strerror(errno);
      close(fd);
      shm_unlink(name.c_str());
      return fail(emuErrorCommFailure, "cannot size the shared segment " + name + ": " + why);
    }
  } else {
    // Rank 0 creates the segment; wait for it (and for its header) within the timeout.
    for (;;) {
      fd = shm_open(name.c_str(), O_RDWR, 0600);
      struct stat st;
      if (fd >= 0 && fstat(fd, &st) == 0 && size_t(st.st_size) == layout.total)
        break;
      if (fd >= 0)
        close(fd);
      if (emu::Clock::now() >= deadline)
        return fail(
            emuErrorCommFailure,
            "rank " + std::to_string(rank) + " timed out after " + std::to_string(timeout_ms) +
                " ms waiting for rank 0 to create " + name +
                " (is rank 0 alive, and do all ranks agree on nranks=" + std::to_string(nranks) + "?)");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  void* base = mmap(nullptr, layout.total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) {
    if (rank == 0)
      shm_unlink(name.c_str());
    return fail(emuErrorCommFailure, "cannot map " + name + ": " + std::strerror(errno));
  }
  auto c = std::make_unique<emu::Comm>();
  c->rank = rank;
  c->nranks = nranks;
  c->device = emu::current_device_index();
  c->timeout_ms = timeout_ms;
  c->name = name;
  c->base = static_cast<char*>(base);
  c->bytes = layout.total;
  c->hdr = reinterpret_cast<emu::Header*>(c->base);
  c->ctl = reinterpret_cast<emu::RankCtl*>(c->base + layout.ctl);
  c->mail = reinterpret_cast<emu::MailCtl*>(c->base + layout.mail);
  c->slots = c->base + layout.slots;
  c->mailboxes = c->base + layout.mailboxes;
  auto* magic = reinterpret_cast<std::atomic<uint64_t>*>(&c->hdr->magic);
  if (rank == 0) {
    c->hdr->nranks = nranks; // the fresh segment is zeroed: counters start at 0
    magic->store(emu::kMagic, std::memory_order_release);
  } else {
    while (magic->load(std::memory_order_acquire) != emu::kMagic) {
      if (emu::Clock::now() >= deadline) {
        emu::unmap(c.get());
        return fail(emuErrorCommFailure, "timed out waiting for rank 0 to set up " + name);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (c->hdr->nranks != nranks) {
      const int theirs = c->hdr->nranks;
      emu::unmap(c.get());
      return fail(
          emuErrorCommFailure,
          "rank 0 made the communicator for " + std::to_string(theirs) + " ranks, rank " + std::to_string(rank) +
              " asks for " + std::to_string(nranks));
    }
  }
  c->ctl[rank].pid.store(int32_t(getpid()), std::memory_order_release);
  // The last rank to join removes the name: the mappings stay, and nothing is left in /dev/shm.
  if (c->hdr->joined.fetch_add(1) + 1 == nranks)
    shm_unlink(name.c_str());
  while (c->hdr->joined.load(std::memory_order_acquire) < nranks) {
    if (emu::Clock::now() >= deadline) {
      const int joined = c->hdr->joined.load();
      c->ctl[rank].pid.store(0);
      if (rank == 0)
        shm_unlink(name.c_str());
      emu::unmap(c.get());
      return fail(
          emuErrorCommFailure,
          "timed out after " + std::to_string(timeout_ms) + " ms: " + std::to_string(joined) + " of " +
              std::to_string(nranks) + " ranks joined " + name);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  std::lock_guard<std::mutex> lock(emu::g_comms_mu);
  emu::live_comms().insert(c.get());
  *comm = reinterpret_cast<emuComm_t>(c.release());
  return emuSuccess;
}

emuError_t emuCommDestroy(emuComm_t comm) {
  emuError_t err = emuSuccess;
  emu::Comm* c = emu::find_comm(comm, &err);
  if (c == nullptr)
    return err;
  {
    std::unique_lock<std::mutex> lock(c->mu);
    c->cv.wait(lock, [c] { return c->pending == 0; });
  }
  {
    std::lock_guard<std::mutex> lock(emu::g_comms_mu);
    emu::live_comms().erase(c);
  }
  c->ctl[c->rank].pid.store(0, std::memory_order_release);
  emu::unmap(c);
  delete c;
  return emuSuccess;
}

emuError_t emuCommAbort(emuComm_t comm) {
  emuError_t err = emuSuccess;
  emu::Comm* c = emu::find_comm(comm, &err);
  if (c == nullptr)
    return err;
  emu::fail_comm(c, "aborted by emuCommAbort");
  return emuSuccess;
}

emuError_t emuCommCount(emuComm_t comm, int* nranks) {
  if (nranks == nullptr)
    return fail(emuErrorInvalidValue, "nranks is null");
  emuError_t err = emuSuccess;
  emu::Comm* c = emu::find_comm(comm, &err);
  if (c == nullptr)
    return err;
  *nranks = c->nranks;
  return emuSuccess;
}

emuError_t emuCommUserRank(emuComm_t comm, int* rank) {
  if (rank == nullptr)
    return fail(emuErrorInvalidValue, "rank is null");
  emuError_t err = emuSuccess;
  emu::Comm* c = emu::find_comm(comm, &err);
  if (c == nullptr)
    return err;
  *rank = c->rank;
  return emuSuccess;
}

emuError_t emuCommDevice(emuComm_t comm, int* device) {
  if (device == nullptr)
    return fail(emuErrorInvalidValue, "device is null");
  emuError_t err = emuSuccess;
  emu::Comm* c = emu::find_comm(comm, &err);
  if (c == nullptr)
    return err;
  *device = c->device;
  return emuSuccess;
}

const char* emuCommGetFailure(emuComm_t comm) {
  thread_local std::string text;
  emuError_t err = emuSuccess;
  emu::Comm* c = emu::find_comm(comm, &err);
  text = c == nullptr ? "unknown or destroyed communicator" : emu::failure_of(c);
  return text.c_str();
}

emuError_t emuCommAllReduce(
    const void* sendbuf,
    void* recvbuf,
    size_t count,
    emuDataType datatype,
    emuRedOp op,
    emuComm_t comm,
    emuStream_t stream) {
  return emu::collective(comm, stream, emu::kAllReduce, sendbuf, recvbuf, count, datatype, op, 0);
}

emuError_t emuCommReduce(
    const void* sendbuf,
    void* recvbuf,
    size_t count,
    emuDataType datatype,
    emuRedOp op,
    int root,
    emuComm_t comm,
    emuStream_t stream) {
  return emu::collective(comm, stream, emu::kReduce, sendbuf, recvbuf, count, datatype, op, root);
}

emuError_t emuCommBroadcast(
    const void* sendbuf,
    void* recvbuf,
    size_t count,
    emuDataType datatype,
    int root,
    emuComm_t comm,
    emuStream_t stream) {
  return emu::collective(comm, stream, emu::kBroadcast, sendbuf, recvbuf, count, datatype, emuSum, root);
}

emuError_t emuCommAllGather(
    const void* sendbuf,
    void* recvbuf,
    size_t sendcount,
    emuDataType datatype,
    emuComm_t comm,
    emuStream_t stream) {
  return emu::collective(comm, stream, emu::kAllGather, sendbuf, recvbuf, sendcount, datatype, emuSum, 0);
}

emuError_t emuCommReduceScatter(
    const void* sendbuf,
    void* recvbuf,
    size_t recvcount,
    emuDataType datatype,
    emuRedOp op,
    emuComm_t comm,
    emuStream_t stream) {
  return emu::collective(comm, stream, emu::kReduceScatter, sendbuf, recvbuf, recvcount, datatype, op, 0);
}

emuError_t emuCommSend(
    const void* sendbuf,
    size_t count,
    emuDataType datatype,
    int peer,
    emuComm_t comm,
    emuStream_t stream) {
  return emu::point_to_point(true, sendbuf, count, datatype, peer, comm, stream);
}

emuError_t emuCommRecv(
    void* recvbuf,
    size_t count,
    emuDataType datatype,
    int peer,
    emuComm_t comm,
    emuStream_t stream) {
  return emu::point_to_point(false, recvbuf, count, datatype, peer, comm, stream);
}

emuError_t emuCommGroupStart(void) {
  ++emu::group().depth;
  return emuSuccess;
}

emuError_t emuCommGroupEnd(void) {
  emu::Group& g = emu::group();
  if (g.depth == 0)
    return fail(emuErrorInvalidValue, "emuCommGroupEnd without emuCommGroupStart");
  if (--g.depth > 0)
    return emuSuccess;
  return emu::flush_group(g);
}

} // extern "C"

#endif // EMU_DRIVER_HAS_COMM
