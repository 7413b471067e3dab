// DeviceBuffer: an owned, zero-filled float buffer, 64-byte aligned on the CPU (one cache line, and
// a full AVX-512 vector, so the optimizer loops never start mid-line) or cudaMalloc'ed on a GPU.
// CPU buffers of 2 MiB or more are backed by transparent huge pages where the kernel allows it
// (Note [Huge pages]).
// Count 0 holds no memory (data() == nullptr). Also the blocking host <-> buffer copies.
#include "kernels/device_buffer.h"

#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <utility>

#include <sys/mman.h>

#include "kernels/errors.h"
#if defined(ZEROLAP_WITH_CUDA)
#include "kernels/cuda_kernels.h"
#endif

namespace zl {
namespace {

constexpr std::size_t kCpuAlignment = 64;

// Note [Huge pages]: the flat parameter and gradient buffers, the optimizer state and the tape's
// arena are allocated once and touched every step by GEMMs, the fused optimizer and the
// collectives. Shared-memory MPI copies a bucket between ranks with process_vm_readv, which walks
// and pins the peer's pages one 4 KiB page at a time; with 2 MiB pages that walk is 512x shorter,
// and GEMM and optimizer loops miss the TLB less. Linux's default (transparent_hugepage = madvise)
// gives huge pages only to memory that asks, so buffers of at least 2 MiB are aligned to 2 MiB
// and madvise(MADV_HUGEPAGE)d before they are first touched. Measured with `mpirun -np 2 zerolap
// bench configs/bench_overlap.toml --set link.bandwidth_gbps=10` on a 2-core machine: step time
// of zero/interleaved/reduce_broadcast 36.0-36.2 -> 34.7-35.4 ms, hidden communication 47-48% ->
// 54-57%. The cost is at most 2 MiB of rounding per such buffer. Where huge pages are off or
// unavailable, madvise fails or is ignored and the buffer is an ordinary one.
constexpr std::size_t kHugePage = std::size_t{2} << 20;

float* cpu_alloc_zeroed(std::int64_t count) {
  ZL_CHECK(static_cast<std::uint64_t>(count) <=
               (std::numeric_limits<std::size_t>::max() - kHugePage) / sizeof(float),
           "DeviceBuffer: {} floats overflow size_t", count);
  const std::size_t bytes = static_cast<std::size_t>(count) * sizeof(float);
  const bool huge = bytes >= kHugePage;
  const std::size_t alignment = huge ? kHugePage : kCpuAlignment;
  // std::aligned_alloc requires the size to be a multiple of the alignment.
  const std::size_t rounded = (bytes + alignment - 1) / alignment * alignment;
  void* mem = std::aligned_alloc(alignment, rounded);
  if (mem == nullptr) throw std::bad_alloc();
#if defined(MADV_HUGEPAGE)
  if (huge) madvise(mem, rounded, MADV_HUGEPAGE);  // a hint: failure leaves ordinary pages
#endif
  std::memset(mem, 0, rounded);  // first touch: faults the pages in, huge where granted
  return static_cast<float*>(mem);
}

void release(float* data, DeviceKind device) {
  if (data == nullptr) return;
  if (device == DeviceKind::Cpu) {
    std::free(data);
    return;
  }
#if defined(ZEROLAP_WITH_CUDA)
  cuda_free(data);
#endif
  // Without CUDA no Cuda buffer can exist: the constructor throws before allocating one.
}

}  // namespace

DeviceBuffer::DeviceBuffer(DeviceKind device, std::int64_t count) : device_(device) {
  ZL_CHECK(count >= 0, "DeviceBuffer: negative count {}", count);
  if (count == 0) return;
  if (device == DeviceKind::Cuda) {
#if defined(ZEROLAP_WITH_CUDA)
    data_ = cuda_alloc_zeroed(count);
#else
    throw_built_without_cuda("DeviceBuffer");
#endif
  } else {
    data_ = cpu_alloc_zeroed(count);
  }
  count_ = count;
}

DeviceBuffer::~DeviceBuffer() { release(data_, device_); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      count_(std::exchange(other.count_, 0)),
      device_(other.device_) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    release(data_, device_);
    data_ = std::exchange(other.data_, nullptr);
    count_ = std::exchange(other.count_, 0);
    device_ = other.device_;
  }
  return *this;
}

void copy_to_host(const float* src, DeviceKind src_device, float* host_dst, std::int64_t count) {
  ZL_CHECK(count >= 0, "copy_to_host: negative count {}", count);
  if (count == 0) return;
  if (src_device == DeviceKind::Cuda) {
#if defined(ZEROLAP_WITH_CUDA)
    cuda_copy_to_host(src, host_dst, count);
    return;
#else
    throw_built_without_cuda("copy_to_host");
#endif
  }
  std::memmove(host_dst, src, static_cast<std::size_t>(count) * sizeof(float));
}

void copy_from_host(const float* host_src, float* dst, DeviceKind dst_device,
                    std::int64_t count) {
  ZL_CHECK(count >= 0, "copy_from_host: negative count {}", count);
  if (count == 0) return;
  if (dst_device == DeviceKind::Cuda) {
#if defined(ZEROLAP_WITH_CUDA)
    cuda_copy_from_host(host_src, dst, count);
    return;
#else
    throw_built_without_cuda("copy_from_host");
#endif
  }
  std::memmove(dst, host_src, static_cast<std::size_t>(count) * sizeof(float));
}

}  // namespace zl
