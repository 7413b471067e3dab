// Internal helpers shared by the kernels/*.cu files (not a public header; CUDA TUs only): the
// stream of an ExecContext, launch sizes for grid-stride loops, deterministic warp/block reductions
// and a stream-ordered scratch allocation. Everything here depends only on its inputs, never on the
// device's SM count or on scheduling, so reductions give bitwise-identical results run to run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include <cuda_runtime.h>

#include "base/cuda_check.h"
#include "base/errors.h"
#include "base/exec_context.h"

namespace zl::cuda_detail {

constexpr int kThreads = 256;        // threads per block of the 1-D kernels
constexpr int kWarpSize = 32;
constexpr int kWarpsPerBlock = kThreads / kWarpSize;
// Cap of the 1-D grids: 4096 * 256 = 1M threads covers every current GPU several times over
// (an H200 holds 132 * 2048 resident threads); bigger inputs are handled by grid-stride loops.
constexpr std::int64_t kMaxBlocks = 4096;

inline cudaStream_t stream_of(const ExecContext& ctx) {
  return static_cast<cudaStream_t>(ctx.stream);
}

// Blocks for a grid-stride loop over `work` items, kThreads per block; work > 0.
inline unsigned grid_for(std::int64_t work) {
  const std::int64_t blocks = (work + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

// Blocks for a warp-per-row kernel over `rows` rows (kWarpsPerBlock rows per block); rows > 0.
inline unsigned grid_for_rows(std::int64_t rows) {
  const std::int64_t blocks = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  return static_cast<unsigned>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

// Stream-ordered scratch memory (cudaMallocAsync/cudaFreeAsync on the kernel's stream): the pool
// makes it cheap per call and no global buffer has to outlive a call. The free is enqueued on the
// same stream, so it happens after every kernel and copy that used the memory.
class StreamScratch {
 public:
  StreamScratch(cudaStream_t stream, std::size_t bytes) : stream_(stream) {
    ZL_CUDA_CHECK(cudaMallocAsync(&ptr_, bytes, stream_));
  }
  ~StreamScratch() {
    // A destructor must not throw; a failed free means the context is already broken and the
    // next checked call reports it.
    const cudaError_t err = cudaFreeAsync(ptr_, stream_);
    if (err != cudaSuccess && err != cudaErrorCudartUnloading) {
      std::fprintf(stderr, "zerolap: cudaFreeAsync of kernel scratch failed: %s\n",
                   cudaGetErrorString(err));
    }
  }
  StreamScratch(const StreamScratch&) = delete;
  StreamScratch& operator=(const StreamScratch&) = delete;

  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  cudaStream_t stream_;
  void* ptr_ = nullptr;
};

// A negative size is a caller's bug.
inline void check_size(std::int64_t n, const char* function) {
  ZL_CHECK(n >= 0, "{}: negative size {}", function, n);
}

#if defined(__CUDACC__)

__device__ __forceinline__ std::int64_t global_thread() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ std::int64_t grid_threads() {
  return static_cast<std::int64_t>(gridDim.x) * blockDim.x;
}

struct SumOp {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};
struct MaxOp {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return a > b ? a : b;
  }
};
struct MinOp {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return a < b ? a : b;
  }
};

// Warp reduction by a fixed butterfly: every lane ends with the result, combined in the same order
// on every run. All 32 lanes must take part.
template <typename T, class Op>
__device__ __forceinline__ T warp_reduce(T x, Op op) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    x = op(x, __shfl_xor_sync(0xffffffffu, x, offset));
  }
  return x;
}

// Reduction over a block of exactly kThreads threads; the result is valid in thread 0. `shared`
// holds kWarpsPerBlock values. Fixed order: per-warp butterflies, then warp 0 combines the warps.
template <typename T, class Op>
__device__ T block_reduce(T x, T identity, T* shared, Op op) {
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  x = warp_reduce(x, op);
  if (lane == 0) shared[warp] = x;
  __syncthreads();
  T total = identity;
  if (warp == 0) total = warp_reduce(lane < kWarpsPerBlock ? shared[lane] : identity, op);
  __syncthreads();  // `shared` may be reused by the caller after this
  return total;
}

#endif  // __CUDACC__

}  // namespace zl::cuda_detail
