/* tacc: the runtime of the toy accelerator "tacc", a system toolkit installed as a Debian package (tacc-toolkit).
 * Its "device memory" is host memory it owns and accounts for; its kernels run on the calling thread. A plugin builds
 * against this header and links libtacc.so from /opt/tacc/lib.
 *
 * API versions: 1.x has memory, copies and vadd; 2.x adds vmul and per-device memory statistics. TACC_VERSION_MAJOR
 * and TACC_VERSION_MINOR say which API a build compiled against; tacc_runtime_version() which one is loaded. */
#ifndef TACC_TACC_H
#define TACC_TACC_H

#include <stddef.h>

#include "tacc/tacc_version.h" /* TACC_VERSION_MAJOR, TACC_VERSION_MINOR: written when the package is built */

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  TACC_SUCCESS = 0,
  TACC_ERROR_INVALID_DEVICE = 1,
  TACC_ERROR_OUT_OF_MEMORY = 2,
  TACC_ERROR_INVALID_VALUE = 3,
} tacc_status;

typedef enum {
  TACC_COPY_HOST_TO_DEVICE = 0,
  TACC_COPY_DEVICE_TO_HOST = 1,
  TACC_COPY_DEVICE_TO_DEVICE = 2,
} tacc_copy_kind;

/* The loaded runtime's API version as major * 1000 + minor. */
int tacc_runtime_version(void);
/* A readable name of a status ("out of memory"). */
const char* tacc_status_string(tacc_status status);

/* Devices: TACC_DEVICE_COUNT in the environment sets their number (default 2, at most 8). */
int tacc_device_count(void);
tacc_status tacc_set_device(int device);
tacc_status tacc_get_device(int* device);

/* Memory on a device; a pointer remembers its device. tacc_free(NULL) does nothing. */
tacc_status tacc_malloc(int device, size_t bytes, void** out);
tacc_status tacc_free(void* pointer);
tacc_status tacc_pointer_device(const void* pointer, int* device);
tacc_status tacc_memcpy(void* dst, const void* src, size_t bytes, tacc_copy_kind kind);

/* Kernels: out[i] = a[i] + alpha * b[i] on n contiguous floats of one device. */
tacc_status tacc_vadd_f32(const float* a, const float* b, float alpha, float* out, size_t n);

#if TACC_VERSION_MAJOR >= 2
/* out[i] = a[i] * b[i]. */
tacc_status tacc_vmul_f32(const float* a, const float* b, float* out, size_t n);
/* Bytes currently allocated on a device, and the most ever allocated at once. */
tacc_status tacc_memory_allocated(int device, size_t* current, size_t* peak);
#endif

#ifdef __cplusplus
}
#endif

#endif /* TACC_TACC_H */
