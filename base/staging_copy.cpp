// Checkpoint staging copies (see staging_copy.h).
#include "base/staging_copy.h"

#include <cstring>

#include "base/errors.h"
#if defined(ZEROLAP_WITH_CUDA)
#include "base/device_memory.h"
#endif

namespace zl {

StagingCopy::StagingCopy(DeviceKind device) : device_(device) {
  if (device_ != DeviceKind::Cuda) return;
#if defined(ZEROLAP_WITH_CUDA)
  stream_ = cuda_staging_stream_create();
#else
  throw_built_without_cuda("StagingCopy");
#endif
}

StagingCopy::~StagingCopy() {
#if defined(ZEROLAP_WITH_CUDA)
  if (stream_) {
    try {
      cuda_staging_stream_wait(stream_);
    } catch (...) {  // a destructor never throws; wait() reports the error where it is called
    }
    cuda_staging_stream_destroy(stream_);
  }
#endif
}

void StagingCopy::copy_to_host(const float* src, float* host_dst, std::int64_t count) {
  ZL_CHECK(count >= 0, "staging copy of {} elements", count);
  const auto bytes = static_cast<std::size_t>(count) * sizeof(float);
  if (device_ == DeviceKind::Cuda) {
#if defined(ZEROLAP_WITH_CUDA)
    cuda_staging_copy_to_host(stream_, src, host_dst, bytes);
    return;
#endif
  }
  if (bytes > 0) std::memcpy(host_dst, src, bytes);
}

void StagingCopy::wait() {
#if defined(ZEROLAP_WITH_CUDA)
  if (stream_) cuda_staging_stream_wait(stream_);
#endif
}

}  // namespace zl
