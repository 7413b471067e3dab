// StagingCopy: copies of device (or host) memory into host memory for a checkpoint's staging
// buffer. On CUDA they run on a copy stream of their own (cudaMemcpyAsync, device to host), queued
// all at once and waited for together; on the CPU they are plain copies. The source must not
// change until wait() returns (the caller stages a quiescent state).
#pragma once

#include <cstdint>

#include "base/device_buffer.h"

namespace zl {

class StagingCopy {
 public:
  explicit StagingCopy(DeviceKind device);
  ~StagingCopy();  // waits for queued copies
  StagingCopy(const StagingCopy&) = delete;
  StagingCopy& operator=(const StagingCopy&) = delete;

  // Queues host_dst[0, count) = src[0, count).
  void copy_to_host(const float* src, float* host_dst, std::int64_t count);
  // Every queued copy has landed in host memory.
  void wait();

 private:
  DeviceKind device_;
  void* stream_ = nullptr;  // CUDA: a cudaStream_t
};

}  // namespace zl
