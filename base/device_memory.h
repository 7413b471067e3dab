// Device memory of DeviceBuffer on CUDA (built only with ZEROLAP_WITH_CUDA): zero-filled
// allocation, free, and blocking host <-> device copies, implemented in base/device_memory.cu.
// base/device_buffer.cpp is the only caller; everything else allocates through DeviceBuffer.
#pragma once

#if defined(ZEROLAP_WITH_CUDA)

#include <cstddef>

namespace zl {

// Sizes are in bytes (a DeviceBuffer holds fp32 or bf16 elements).
void* cuda_alloc_zeroed(std::size_t bytes);
void cuda_free(void* p);
std::int64_t cuda_free_bytes();  // cudaMemGetInfo's free bytes of the current device
void cuda_copy_to_host(const void* src, void* host_dst, std::size_t bytes);
void cuda_copy_from_host(const void* host_src, void* dst, std::size_t bytes);

}  // namespace zl

#endif  // ZEROLAP_WITH_CUDA
