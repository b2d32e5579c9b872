// Kernel-only timings of cuSZp's float32 kernels, for benchmarks/gpu_fair.py (issue #29).
//
// cuSZp's C API (cuSZp_compress / cuSZp_decompress) allocates and zeroes its three look-back
// arrays, launches one kernel, copies the size back (compress) and frees the arrays in every
// call, so CUDA events around it time all of that. This small library launches the same
// kernels, with the grid its entry points compute, on buffers the
// caller owns: the look-back arrays are allocated once and zeroed before each launch,
// outside the events, so a sample is the kernel alone. No cuSZp code is copied here: the
// kernels are declared (their signatures are cuSZp's public headers') and compiled from the
// user's cuSZp checkout into the same library, with the flags of scripts/build_cuszp.sh's
// Release build (libcuSZp.so itself does not export the kernels' host stubs to link against).
//
// Build (on the GPU machine; benchmarks/gpu_fair_device.sh does it), SRC a cuSZp checkout:
//   nvcc -O3 -DNDEBUG -arch=sm_90 -shared -Xcompiler -fPIC -I$SRC/include -I$SRC/include/cuSZp \
//        -o libcuszp_timer.so benchmarks/cuszp_kernel_timer.cu $SRC/src/cuSZp_kernels_{1,2,3}D_f32.cu
#include <cuda_runtime.h>
#include <cstddef>

#define CMP1D(name) __global__ void name(const float* const __restrict__, unsigned char* const __restrict__, \
    volatile unsigned int* const __restrict__, volatile unsigned int* const __restrict__, \
    volatile int* const __restrict__, const float, const size_t)
#define DEC1D(name) __global__ void name(float* const __restrict__, const unsigned char* const __restrict__, \
    volatile unsigned int* const __restrict__, volatile unsigned int* const __restrict__, \
    volatile int* const __restrict__, const float, const size_t)
#define CMPND(name) __global__ void name(const float* const __restrict__, unsigned char* const __restrict__, \
    volatile unsigned int* const __restrict__, volatile unsigned int* const __restrict__, \
    volatile int* const __restrict__, uint, const uint3, const float)
#define DECND(name) __global__ void name(float* const __restrict__, const unsigned char* const __restrict__, \
    volatile unsigned int* const __restrict__, volatile unsigned int* const __restrict__, \
    volatile int* const __restrict__, uint, const uint3, const float)

CMP1D(cuSZp_compress_kernel_1D_fixed_f32);   DEC1D(cuSZp_decompress_kernel_1D_fixed_f32);
CMP1D(cuSZp_compress_kernel_1D_plain_f32);   DEC1D(cuSZp_decompress_kernel_1D_plain_f32);
CMP1D(cuSZp_compress_kernel_1D_outlier_f32); DEC1D(cuSZp_decompress_kernel_1D_outlier_f32);
CMPND(cuSZp_compress_kernel_2D_fixed_vec4_f32);   DECND(cuSZp_decompress_kernel_2D_fixed_vec4_f32);
CMPND(cuSZp_compress_kernel_2D_plain_vec4_f32);   DECND(cuSZp_decompress_kernel_2D_plain_vec4_f32);
CMPND(cuSZp_compress_kernel_2D_outlier_vec4_f32); DECND(cuSZp_decompress_kernel_2D_outlier_vec4_f32);
CMPND(cuSZp_compress_kernel_3D_fixed_vec4_f32);   DECND(cuSZp_decompress_kernel_3D_fixed_vec4_f32);
CMPND(cuSZp_compress_kernel_3D_plain_vec4_f32);   DECND(cuSZp_decompress_kernel_3D_plain_vec4_f32);
CMPND(cuSZp_compress_kernel_3D_outlier_vec4_f32); DECND(cuSZp_decompress_kernel_3D_outlier_vec4_f32);

// cuSZp's fixed launch geometry (its kernel headers: 32 threads a CTA; 1-D: 1024 elements a
// thread; 2-D/3-D: 16 blocks of 64 elements a thread) and 8 bytes of dynamic shared memory.
static const int kThreads = 32, kChunk1D = 1024, kBlocksPerThread = 16;

static void launch(int compress, int mode, int dim, const float* in, unsigned char* cmp, float* out,
                   size_t n, uint3 dims, float eb, unsigned* off, unsigned* loc, int* flag,
                   unsigned grid, unsigned block_num, cudaStream_t s) {
  const size_t shm = 2 * sizeof(unsigned);
  if (dim == 1) {
    if (compress) {
      if (mode == 0) cuSZp_compress_kernel_1D_fixed_f32<<<grid, kThreads, shm, s>>>(in, cmp, off, loc, flag, eb, n);
      if (mode == 1) cuSZp_compress_kernel_1D_plain_f32<<<grid, kThreads, shm, s>>>(in, cmp, off, loc, flag, eb, n);
      if (mode == 2) cuSZp_compress_kernel_1D_outlier_f32<<<grid, kThreads, shm, s>>>(in, cmp, off, loc, flag, eb, n);
    } else {
      if (mode == 0) cuSZp_decompress_kernel_1D_fixed_f32<<<grid, kThreads, shm, s>>>(out, cmp, off, loc, flag, eb, n);
      if (mode == 1) cuSZp_decompress_kernel_1D_plain_f32<<<grid, kThreads, shm, s>>>(out, cmp, off, loc, flag, eb, n);
      if (mode == 2) cuSZp_decompress_kernel_1D_outlier_f32<<<grid, kThreads, shm, s>>>(out, cmp, off, loc, flag, eb, n);
    }
  } else if (dim == 2) {
    if (compress) {
      if (mode == 0) cuSZp_compress_kernel_2D_fixed_vec4_f32<<<grid, kThreads, shm, s>>>(in, cmp, off, loc, flag, block_num, dims, eb);
      if (mode == 1) cuSZp_compress_kernel_2D_plain_vec4_f32<<<grid, kThreads, shm, s>>>(in, cmp, off, loc, flag, block_num, dims, eb);
      if (mode == 2) cuSZp_compress_kernel_2D_outlier_vec4_f32<<<grid, kThreads, shm, s>>>(in, cmp, off, loc, flag, block_num, dims, eb);
    } else {
      if (mode == 0) cuSZp_decompress_kernel_2D_fixed_vec4_f32<<<grid, kThreads, shm, s>>>(out, cmp, off, loc, flag, block_num, dims, eb);
      if (mode == 1) cuSZp_decompress_kernel_2D_plain_vec4_f32<<<grid, kThreads, shm, s>>>(out, cmp, off, loc, flag, block_num, dims, eb);
      if (mode == 2) cuSZp_decompress_kernel_2D_outlier_vec4_f32<<<grid, kThreads, shm, s>>>(out, cmp, off, loc, flag, block_num, dims, eb);
    }
  } else {
    if (compress) {
      if (mode == 0) cuSZp_compress_kernel_3D_fixed_vec4_f32<<<grid, kThreads, shm, s>>>(in, cmp, off, loc, flag, block_num, dims, eb);
      if (mode == 1) cuSZp_compress_kernel_3D_plain_vec4_f32<<<grid, kThreads, shm, s>>>(in, cmp, off, loc, flag, block_num, dims, eb);
      if (mode == 2) cuSZp_compress_kernel_3D_outlier_vec4_f32<<<grid, kThreads, shm, s>>>(in, cmp, off, loc, flag, block_num, dims, eb);
    } else {
      if (mode == 0) cuSZp_decompress_kernel_3D_fixed_vec4_f32<<<grid, kThreads, shm, s>>>(out, cmp, off, loc, flag, block_num, dims, eb);
      if (mode == 1) cuSZp_decompress_kernel_3D_plain_vec4_f32<<<grid, kThreads, shm, s>>>(out, cmp, off, loc, flag, block_num, dims, eb);
      if (mode == 2) cuSZp_decompress_kernel_3D_outlier_vec4_f32<<<grid, kThreads, shm, s>>>(out, cmp, off, loc, flag, block_num, dims, eb);
    }
  }
}

// Times `repeats` launches (after one warm-up) of the compress kernel (compress = 1: `in` ->
// `cmp`) or the decompress kernel (compress = 0: `cmp` -> `out`) of cuSZp mode `mode`
// (0 fixed, 1 plain, 2 outlier) with `dim`-D processing; milliseconds per launch go to
// ms[0..repeats). For compress, *last_offset gets the kernel's final look-back sum (cuSZp's
// API adds the rate bytes to it for its reported size). Returns a cudaError_t (0: success).
extern "C" int cuszp_time_kernel(int compress, int mode, int dim, const float* in, unsigned char* cmp,
                                 float* out, size_t n, unsigned x, unsigned y, unsigned z, float eb,
                                 int repeats, void* stream, float* ms, unsigned* last_offset) {
  if (mode < 0 || mode > 2 || dim < 1 || dim > 3 || repeats < 1) return (int)cudaErrorInvalidValue;
  cudaStream_t s = (cudaStream_t)stream;
  uint3 dims = make_uint3(x, y, z);
  unsigned block_num = 0, grid;
  if (dim == 1) {
    grid = (unsigned)((n + (size_t)kThreads * kChunk1D - 1) / ((size_t)kThreads * kChunk1D));
  } else {
    block_num = dim == 2 ? z * ((y + 7) / 8) * ((x + 7) / 8)
                         : ((z + 3) / 4) * ((y + 3) / 4) * ((x + 3) / 4);
    grid = (block_num + kThreads * kBlocksPerThread - 1) / (kThreads * kBlocksPerThread);
  }
  const size_t slots = (size_t)grid + 1;
  unsigned *off = nullptr, *loc = nullptr;
  int* flag = nullptr;
  cudaEvent_t a = nullptr, b = nullptr;
  cudaError_t err = cudaMalloc((void**)&off, slots * sizeof(unsigned));
  if (!err) err = cudaMalloc((void**)&loc, slots * sizeof(unsigned));
  if (!err) err = cudaMalloc((void**)&flag, slots * sizeof(int));
  if (!err) err = cudaEventCreate(&a);
  if (!err) err = cudaEventCreate(&b);
  for (int r = -1; r < repeats && !err; ++r) {  // r = -1: the warm-up
    err = cudaMemsetAsync(off, 0, slots * sizeof(unsigned), s);
    if (!err) err = cudaMemsetAsync(loc, 0, slots * sizeof(unsigned), s);
    if (!err) err = cudaMemsetAsync(flag, 0, slots * sizeof(int), s);
    if (!err) err = cudaEventRecord(a, s);
    if (err) break;
    launch(compress, mode, dim, in, cmp, out, n, dims, eb, off, loc, flag, grid, block_num, s);
    err = cudaGetLastError();
    if (!err) err = cudaEventRecord(b, s);
    if (!err) err = cudaEventSynchronize(b);
    float t = 0.f;
    if (!err) err = cudaEventElapsedTime(&t, a, b);
    if (!err && r >= 0) ms[r] = t;
  }
  if (!err && compress && last_offset)
    err = cudaMemcpy(last_offset, off + slots - 1, sizeof(unsigned), cudaMemcpyDeviceToHost);
  if (a) cudaEventDestroy(a);
  if (b) cudaEventDestroy(b);
  cudaFree(off);
  cudaFree(loc);
  cudaFree(flag);
  return (int)err;
}
