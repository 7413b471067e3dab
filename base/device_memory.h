// Device memory of DeviceBuffer on CUDA (built only with ZEROLAP_WITH_CUDA): zero-filled
// allocation, free, and blocking host <-> device copies, implemented in base/device_memory.cu.
// base/device_buffer.cpp is the only caller; everything else allocates through DeviceBuffer.
#pragma once

#if defined(ZEROLAP_WITH_CUDA)

#include <cstdint>

namespace zl {

float* cuda_alloc_zeroed(std::int64_t count);
void cuda_free(float* p);
void cuda_copy_to_host(const float* src, float* host_dst, std::int64_t count);
void cuda_copy_from_host(const float* host_src, float* dst, std::int64_t count);

}  // namespace zl

#endif  // ZEROLAP_WITH_CUDA
