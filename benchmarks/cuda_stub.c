/* A CUDA driver without a GPU: the part of libcuda's API that Taichi 1.7.4 calls, so that
 * Taichi starts on arch=cuda on a machine without one and compiles every kernel a scene
 * launches to PTX (print_kernel_asm writes it out), which ptxas then assembles for the GPU
 * named below: registers, stack and spills are properties of the code, not of the device
 * (benchmarks/ptx_registers.py --no-gpu).
 *
 * Nothing runs: a launch does nothing, device memory is host memory (calloc), copies are
 * memcpy, so every value read back is zero or what the host wrote. The engine's host logic
 * then takes whatever paths zeros lead it to, which compiles what those paths launch; the
 * tool reads the kernels, never the results.
 *
 * The device it describes: FX2D_STUB_CC_MAJOR.FX2D_STUB_CC_MINOR (default 9.0, an H100 or
 * H200) with FX2D_STUB_MULTIPROCESSORS multiprocessors (default 132, an H200's), so a scene
 * picks the executor it would pick there (a grid team of a block per multiprocessor), and
 * Taichi configures itself as there (its loops' grids): the kernels it compiles here, and
 * writes to its offline cache, are those an H100 or H200 compiles, under the same keys
 * (a lent GPU machine starts warm from them: benchmarks/device_cache.py).
 * Every function returns CUDA_SUCCESS (0); those not listed by name take no arguments they
 * read. Build: cc -shared -fPIC -o libcuda.so.1 cuda_stub.c */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
enum { CUDA_SUCCESS = 0, CUDA_ERROR_OUT_OF_MEMORY = 2 };
/* CUdevice_attribute values the stub answers (cuda.h). */
enum {
  MAX_THREADS_PER_BLOCK = 1, MAX_BLOCK_DIM_X = 2, MAX_BLOCK_DIM_Y = 3, MAX_BLOCK_DIM_Z = 4,
  MAX_GRID_DIM_X = 5, MAX_GRID_DIM_Y = 6, MAX_GRID_DIM_Z = 7, SHARED_MEMORY_PER_BLOCK = 8,
  WARP_SIZE = 10, REGISTERS_PER_BLOCK = 12, MULTIPROCESSOR_COUNT = 16,
  MAX_THREADS_PER_MULTIPROCESSOR = 39, COMPUTE_CAPABILITY_MAJOR = 75,
  COMPUTE_CAPABILITY_MINOR = 76, REGISTERS_PER_MULTIPROCESSOR = 82,
  MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97, MAX_BLOCKS_PER_MULTIPROCESSOR = 106,
  MEMORY_POOLS_SUPPORTED = 115
};

/* Handles (context, stream, event, module, function): distinct non-null addresses. */
static char handles[8][8];

static int from_env(const char *name, int fallback) {
  const char *value = getenv(name);
  return value && *value ? atoi(value) : fallback;
}

static CUresult allocated(void **ptr, size_t bytes) {
  *ptr = calloc(1, bytes ? bytes : 1);
  return *ptr ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

#define NOTHING(name) \
  CUresult name(void) { return CUDA_SUCCESS; }

CUresult cuInit(unsigned flags) { return CUDA_SUCCESS; }
CUresult cuDriverGetVersion(int *version) { *version = 12040; return CUDA_SUCCESS; }
CUresult cuDeviceGetCount(int *count) { *count = 1; return CUDA_SUCCESS; }
CUresult cuDeviceGet(int *device, int ordinal) { *device = 0; return CUDA_SUCCESS; }
CUresult cuCtxGetDevice(int *device) { *device = 0; return CUDA_SUCCESS; }
CUresult cuDeviceGetName(char *name, int length, int device) {
  strncpy(name, "CUDA stub (no GPU)", (size_t)length);
  name[length - 1] = '\0';
  return CUDA_SUCCESS;
}
CUresult cuDeviceGetAttribute(int *value, int attribute, int device) {
  switch (attribute) {
    case COMPUTE_CAPABILITY_MAJOR: *value = from_env("FX2D_STUB_CC_MAJOR", 9); break;
    case COMPUTE_CAPABILITY_MINOR: *value = from_env("FX2D_STUB_CC_MINOR", 0); break;
    case MULTIPROCESSOR_COUNT: *value = from_env("FX2D_STUB_MULTIPROCESSORS", 132); break;
    case MAX_THREADS_PER_BLOCK: case MAX_BLOCK_DIM_X: case MAX_BLOCK_DIM_Y: *value = 1024; break;
    case MAX_BLOCK_DIM_Z: *value = 64; break;
    case MAX_GRID_DIM_X: *value = 2147483647; break;
    case MAX_GRID_DIM_Y: case MAX_GRID_DIM_Z: *value = 65535; break;
    case SHARED_MEMORY_PER_BLOCK: *value = 49152; break;
    case WARP_SIZE: *value = 32; break;
    case REGISTERS_PER_BLOCK: case REGISTERS_PER_MULTIPROCESSOR: *value = 65536; break;
    case MAX_THREADS_PER_MULTIPROCESSOR: *value = 2048; break;
    /* Taichi reads these two (and the multiprocessors) when it starts, and compiles what
     * it makes of them into every kernel and its offline cache key: a loop's grid is
     * multiprocessors x blocks a multiprocessor x 2 (8,448 on an H100 or H200, as the
     * H200's kernel profile showed). The H100's and H200's values, so that a kernel
     * compiled here is the one those GPUs compile (benchmarks/device_cache.py). */
    case MAX_BLOCKS_PER_MULTIPROCESSOR: *value = 32; break;
    case MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *value = 232448; break;
    case MEMORY_POOLS_SUPPORTED: *value = 1; break;
    default: *value = 1; break;
  }
  return CUDA_SUCCESS;
}
CUresult cuDeviceGetDefaultMemPool(void **pool, int device) { *pool = handles[0]; return CUDA_SUCCESS; }
CUresult cuDevicePrimaryCtxRetain(void **context, int device) { *context = handles[1]; return CUDA_SUCCESS; }
CUresult cuCtxCreate_v2(void **context, unsigned flags, int device) { *context = handles[1]; return CUDA_SUCCESS; }
CUresult cuCtxGetCurrent(void **context) { *context = handles[1]; return CUDA_SUCCESS; }
CUresult cuStreamCreate(void **stream, unsigned flags) { *stream = handles[2]; return CUDA_SUCCESS; }
CUresult cuEventCreate(void **event, unsigned flags) { *event = handles[3]; return CUDA_SUCCESS; }
CUresult cuEventElapsedTime(float *ms, void *start, void *end) { *ms = 0.0f; return CUDA_SUCCESS; }
CUresult cuGetErrorName(int error, const char **text) { *text = "CUDA_STUB"; return CUDA_SUCCESS; }
CUresult cuGetErrorString(int error, const char **text) { *text = "the CUDA stub has no GPU"; return CUDA_SUCCESS; }
CUresult cuMemAlloc_v2(void **ptr, size_t bytes) { return allocated(ptr, bytes); }
CUresult cuMemAllocManaged(void **ptr, size_t bytes, unsigned flags) { return allocated(ptr, bytes); }
CUresult cuMemAllocAsync(void **ptr, size_t bytes, void *stream) { return allocated(ptr, bytes); }
CUresult cuMemFree_v2(void *ptr) { free(ptr); return CUDA_SUCCESS; }
CUresult cuMemFreeAsync(void *ptr, void *stream) { free(ptr); return CUDA_SUCCESS; }
CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes) {
  *free_bytes = (size_t)8 << 30;
  *total_bytes = (size_t)16 << 30;
  return CUDA_SUCCESS;
}
CUresult cuMemcpyHtoD_v2(void *dst, const void *src, size_t n) { memcpy(dst, src, n); return CUDA_SUCCESS; }
CUresult cuMemcpyDtoH_v2(void *dst, const void *src, size_t n) { memcpy(dst, src, n); return CUDA_SUCCESS; }
CUresult cuMemcpyDtoD_v2(void *dst, const void *src, size_t n) { memcpy(dst, src, n); return CUDA_SUCCESS; }
CUresult cuMemcpyHtoDAsync_v2(void *dst, const void *src, size_t n, void *stream) { memcpy(dst, src, n); return CUDA_SUCCESS; }
CUresult cuMemcpyDtoHAsync_v2(void *dst, const void *src, size_t n, void *stream) { memcpy(dst, src, n); return CUDA_SUCCESS; }
CUresult cuMemsetD8_v2(void *dst, unsigned char value, size_t n) { memset(dst, value, n); return CUDA_SUCCESS; }
CUresult cuMemsetD32_v2(void *dst, unsigned value, size_t n) {
  uint32_t *words = dst;
  for (size_t i = 0; i < n; i++) words[i] = value;
  return CUDA_SUCCESS;
}
CUresult cuModuleLoadDataEx(void **module, const void *image, unsigned n, void *options, void **values) {
  *module = handles[4];
  return CUDA_SUCCESS;
}
CUresult cuModuleGetFunction(void **function, void *module, const char *name) { *function = handles[5]; return CUDA_SUCCESS; }
CUresult cuFuncGetAttribute(int *value, int attribute, void *function) { *value = 0; return CUDA_SUCCESS; }
CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *blocks, void *function, int block, size_t shared) {
  *blocks = 1;
  return CUDA_SUCCESS;
}
CUresult cuPointerGetAttribute(void *data, int attribute, void *ptr) { memset(data, 0, 8); return CUDA_SUCCESS; }

NOTHING(cuCtxSetCurrent) NOTHING(cuCtxSetLimit) NOTHING(cuStreamSynchronize)
NOTHING(cuEventDestroy) NOTHING(cuEventRecord) NOTHING(cuEventSynchronize)
NOTHING(cuMemAdvise) NOTHING(cuMemPoolSetAttribute) NOTHING(cuFuncSetAttribute)
NOTHING(cuLaunchKernel) NOTHING(cuExternalMemoryGetMappedBuffer)
NOTHING(cuExternalMemoryGetMappedMipmappedArray) NOTHING(cuImportExternalMemory)
NOTHING(cuImportExternalSemaphore) NOTHING(cuMipmappedArrayGetLevel)
NOTHING(cuSignalExternalSemaphoresAsync) NOTHING(cuWaitExternalSemaphoresAsync)
NOTHING(cuSurfObjectCreate)
