// DeviceBuffer: an owned, zero-filled float buffer, 64-byte aligned on the CPU (one cache line, and
// a full AVX-512 vector, so the optimizer loops never start mid-line) or cudaMalloc'ed on a GPU.
// Count 0 holds no memory (data() == nullptr). Also the blocking host <-> buffer copies.
#include "kernels/device_buffer.h"

#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <utility>

#include "kernels/errors.h"
#if defined(ZEROLAP_WITH_CUDA)
#include "kernels/cuda_kernels.h"
#endif

namespace zl {
namespace {

constexpr std::size_t kCpuAlignment = 64;

float* cpu_alloc_zeroed(std::int64_t count) {
  ZL_CHECK(static_cast<std::uint64_t>(count) <=
               (std::numeric_limits<std::size_t>::max() - kCpuAlignment) / sizeof(float),
           "DeviceBuffer: {} floats overflow size_t", count);
  // std::aligned_alloc requires the size to be a multiple of the alignment.
  const std::size_t bytes = static_cast<std::size_t>(count) * sizeof(float);
  const std::size_t rounded = (bytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
  void* mem = std::aligned_alloc(kCpuAlignment, rounded);
  if (mem == nullptr) throw std::bad_alloc();
  std::memset(mem, 0, rounded);
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
