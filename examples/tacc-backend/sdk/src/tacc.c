/* The tacc runtime: device memory is host memory behind a small header that records its device and size. */
#include "tacc/tacc.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define TACC_MAX_DEVICES 8
#define TACC_MAGIC 0x74616363u /* "tacc" */

typedef struct {
  uint32_t magic;
  int device;
  size_t bytes;
  size_t pad; /* keeps the payload 16-byte aligned */
} tacc_block;

static pthread_mutex_t tacc_lock = PTHREAD_MUTEX_INITIALIZER;
static size_t tacc_current[TACC_MAX_DEVICES];
static size_t tacc_peak[TACC_MAX_DEVICES];
static __thread int tacc_current_device = 0;

int tacc_runtime_version(void) { return TACC_VERSION_MAJOR * 1000 + TACC_VERSION_MINOR; }

const char* tacc_status_string(tacc_status status) {
  switch (status) {
    case TACC_SUCCESS: return "success";
    case TACC_ERROR_INVALID_DEVICE: return "invalid device";
    case TACC_ERROR_OUT_OF_MEMORY: return "out of memory";
    case TACC_ERROR_INVALID_VALUE: return "invalid value";
  }
  return "unknown status";
}

int tacc_device_count(void) {
  const char* text = getenv("TACC_DEVICE_COUNT");
  if (text == NULL || *text == '\0') return 2;
  int count = atoi(text);
  if (count < 0) return 0;
  return count > TACC_MAX_DEVICES ? TACC_MAX_DEVICES : count;
}

static int valid_device(int device) { return device >= 0 && device < tacc_device_count(); }

tacc_status tacc_set_device(int device) {
  if (!valid_device(device)) return TACC_ERROR_INVALID_DEVICE;
  tacc_current_device = device;
  return TACC_SUCCESS;
}

tacc_status tacc_get_device(int* device) {
  if (device == NULL) return TACC_ERROR_INVALID_VALUE;
  *device = tacc_current_device;
  return TACC_SUCCESS;
}

static tacc_block* block_of(const void* pointer) {
  if (pointer == NULL) return NULL;
  tacc_block* block = (tacc_block*)((char*)pointer - sizeof(tacc_block));
  return block->magic == TACC_MAGIC ? block : NULL;
}

tacc_status tacc_malloc(int device, size_t bytes, void** out) {
  if (out == NULL) return TACC_ERROR_INVALID_VALUE;
  if (!valid_device(device)) return TACC_ERROR_INVALID_DEVICE;
  tacc_block* block = malloc(sizeof(tacc_block) + (bytes ? bytes : 1));
  if (block == NULL) return TACC_ERROR_OUT_OF_MEMORY;
  block->magic = TACC_MAGIC;
  block->device = device;
  block->bytes = bytes;
  pthread_mutex_lock(&tacc_lock);
  tacc_current[device] += bytes;
  if (tacc_current[device] > tacc_peak[device]) tacc_peak[device] = tacc_current[device];
  pthread_mutex_unlock(&tacc_lock);
  *out = block + 1;
  return TACC_SUCCESS;
}

tacc_status tacc_free(void* pointer) {
  if (pointer == NULL) return TACC_SUCCESS;
  tacc_block* block = block_of(pointer);
  if (block == NULL) return TACC_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&tacc_lock);
  tacc_current[block->device] -= block->bytes;
  pthread_mutex_unlock(&tacc_lock);
  block->magic = 0;
  free(block);
  return TACC_SUCCESS;
}

tacc_status tacc_pointer_device(const void* pointer, int* device) {
  const tacc_block* block = block_of(pointer);
  if (block == NULL || device == NULL) return TACC_ERROR_INVALID_VALUE;
  *device = block->device;
  return TACC_SUCCESS;
}

tacc_status tacc_memcpy(void* dst, const void* src, size_t bytes, tacc_copy_kind kind) {
  if (bytes == 0) return TACC_SUCCESS;
  if (dst == NULL || src == NULL) return TACC_ERROR_INVALID_VALUE;
  if (kind > TACC_COPY_DEVICE_TO_DEVICE) return TACC_ERROR_INVALID_VALUE;
  memmove(dst, src, bytes);
  return TACC_SUCCESS;
}

tacc_status tacc_vadd_f32(const float* a, const float* b, float alpha, float* out, size_t n) {
  if (n > 0 && (a == NULL || b == NULL || out == NULL)) return TACC_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < n; ++i) out[i] = a[i] + alpha * b[i];
  return TACC_SUCCESS;
}

#if TACC_VERSION_MAJOR >= 2
tacc_status tacc_vmul_f32(const float* a, const float* b, float* out, size_t n) {
  if (n > 0 && (a == NULL || b == NULL || out == NULL)) return TACC_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < n; ++i) out[i] = a[i] * b[i];
  return TACC_SUCCESS;
}

tacc_status tacc_memory_allocated(int device, size_t* current, size_t* peak) {
  if (!valid_device(device)) return TACC_ERROR_INVALID_DEVICE;
  if (current == NULL || peak == NULL) return TACC_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&tacc_lock);
  *current = tacc_current[device];
  *peak = tacc_peak[device];
  pthread_mutex_unlock(&tacc_lock);
  return TACC_SUCCESS;
}
#endif
