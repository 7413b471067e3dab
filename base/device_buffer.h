// An owned, zero-initialised buffer of `count` elements of one DType (fp32 or bf16) on the CPU
// (64-byte aligned) or a CUDA device (cudaMalloc). Move-only. Tensors and parameter views point
// into these; nothing else allocates. data() is the fp32 view (what all fp32 code uses);
// data<T>() is the typed view and checks that T is the buffer's dtype.
#pragma once

#include <cstdint>
#include <vector>

#include "base/dtype.h"
#include "base/exec_context.h"

namespace zl {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // count elements of `dtype`, zero-filled (all-zero bits: +0.0 in fp32 and bf16).
  DeviceBuffer(DeviceKind device, std::int64_t count, DType dtype = DType::F32);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // The elements as T; T must be the buffer's storage type (float for F32, Bf16 for BF16). An
  // empty buffer of any dtype gives nullptr.
  template <class T>
  T* data() const {
    if (dtype_of<T> != dtype_ && data_ != nullptr) throw_dtype_mismatch(dtype_of<T>);
    return static_cast<T*>(data_);
  }
  float* data() const { return data<float>(); }  // fp32 buffers only
  void* raw() const { return data_; }              // untyped, for byte copies and collectives
  std::int64_t size() const { return count_; }     // elements
  std::int64_t bytes() const { return count_ * dtype_size(dtype_); }
  DType dtype() const { return dtype_; }
  DeviceKind device() const { return device_; }

 private:
  [[noreturn]] void throw_dtype_mismatch(DType asked) const;

  void* data_ = nullptr;
  std::int64_t count_ = 0;
  DeviceKind device_ = DeviceKind::Cpu;
  DType dtype_ = DType::F32;
};

// Bytes allocated by `buffers` together.
inline std::int64_t total_bytes(const std::vector<DeviceBuffer>& buffers) {
  std::int64_t bytes = 0;
  for (const DeviceBuffer& b : buffers) bytes += b.bytes();
  return bytes;
}

// Copies between host memory and a buffer of either kind (blocking; not for the step path).
void copy_bytes_to_host(const void* src, DeviceKind src_device, void* host_dst, std::int64_t bytes);
void copy_bytes_from_host(const void* host_src, void* dst, DeviceKind dst_device,
                          std::int64_t bytes);

// Typed forms: count elements of T (float or Bf16).
template <class T>
void copy_to_host(const T* src, DeviceKind src_device, T* host_dst, std::int64_t count) {
  copy_bytes_to_host(src, src_device, host_dst, count * static_cast<std::int64_t>(sizeof(T)));
}
template <class T>
void copy_from_host(const T* host_src, T* dst, DeviceKind dst_device, std::int64_t count) {
  copy_bytes_from_host(host_src, dst, dst_device, count * static_cast<std::int64_t>(sizeof(T)));
}

// Free memory of the current GPU in bytes (memory estimates); -1 for the CPU, whose memory the
// caller reads from the OS.
std::int64_t device_free_bytes(DeviceKind device);

}  // namespace zl
