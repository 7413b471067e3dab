// An owned, zero-initialised float buffer on the CPU (64-byte aligned) or a CUDA device
// (cudaMalloc). Move-only. Tensors and parameter views point into these; nothing else allocates.
#pragma once

#include <cstdint>

#include "base/exec_context.h"

namespace zl {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(DeviceKind device, std::int64_t count);  // count floats, zero-filled
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  float* data() const { return data_; }
  std::int64_t size() const { return count_; }
  DeviceKind device() const { return device_; }

 private:
  float* data_ = nullptr;
  std::int64_t count_ = 0;
  DeviceKind device_ = DeviceKind::Cpu;
};

// Copies between host memory and a buffer of either kind (blocking; not for the step path).
void copy_to_host(const float* src, DeviceKind src_device, float* host_dst, std::int64_t count);
void copy_from_host(const float* host_src, float* dst, DeviceKind dst_device, std::int64_t count);

}  // namespace zl
