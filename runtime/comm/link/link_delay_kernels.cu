// The simulated link's reserve and wait kernels (see link_delay_kernels.h).
#include "runtime/comm/link/link_delay_kernels.h"

#include <cuda_runtime.h>

#include "base/cuda_check.h"

namespace zl {
namespace {

__device__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void link_reserve_kernel(unsigned long long* busy_until, unsigned long long* slot_end,
                                    unsigned long long duration_ns) {
  const unsigned long long now = global_ns();
  unsigned long long seen = atomicAdd(busy_until, 0ull);  // an atomic read
  for (;;) {
    const unsigned long long end = (seen > now ? seen : now) + duration_ns;
    const unsigned long long prior = atomicCAS(busy_until, seen, end);
    if (prior == seen) {
      *slot_end = end;
      return;
    }
    seen = prior;  // the other stream reserved first: queue behind it
  }
}

__global__ void link_wait_kernel(const unsigned long long* slot_end) {
  const unsigned long long end = *reinterpret_cast<const volatile unsigned long long*>(slot_end);
  while (global_ns() < end) {
#if __CUDA_ARCH__ >= 700
    __nanosleep(2000);  // leave the SM's issue slots to compute kernels
#endif
  }
}

static_assert(sizeof(unsigned long long) == sizeof(std::uint64_t), "64-bit clock slots");

}  // namespace

void launch_link_reserve(void* stream, std::uint64_t* busy_until, std::uint64_t* slot_end,
                         std::uint64_t duration_ns) {
  link_reserve_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(
      reinterpret_cast<unsigned long long*>(busy_until),
      reinterpret_cast<unsigned long long*>(slot_end), duration_ns);
  ZL_CUDA_CHECK(cudaGetLastError());
}

void launch_link_wait(void* stream, const std::uint64_t* slot_end) {
  link_wait_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(
      reinterpret_cast<const unsigned long long*>(slot_end));
  ZL_CUDA_CHECK(cudaGetLastError());
}

}  // namespace zl
