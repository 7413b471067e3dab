// Device memory of DeviceBuffer on CUDA (built only with ZEROLAP_WITH_CUDA): zero-filled
// allocation, free, and blocking host <-> device copies, implemented in base/device_memory.cu.
// base/device_buffer.cpp and base/staging_copy.cpp are the only callers; everything else allocates
// through DeviceBuffer.
#pragma once

#if defined(ZEROLAP_WITH_CUDA)

#include <cstddef>
#include <cstdint>

namespace zl {

// Sizes are in bytes (a DeviceBuffer holds fp32 or bf16 elements).
void* cuda_alloc_zeroed(std::size_t bytes);
void cuda_free(void* p);
std::int64_t cuda_free_bytes();  // cudaMemGetInfo's free bytes of the current device
void cuda_copy_to_host(const void* src, void* host_dst, std::size_t bytes);
void cuda_copy_from_host(const void* host_src, void* dst, std::size_t bytes);
// The stream of base/staging_copy.h (a cudaStream_t): made after a device sync, copies queued on
// it, waited for.
void* cuda_staging_stream_create();
void cuda_staging_stream_destroy(void* stream);
void cuda_staging_copy_to_host(void* stream, const void* src, void* host_dst, std::size_t bytes);
void cuda_staging_stream_wait(void* stream);

}  // namespace zl

#endif  // ZEROLAP_WITH_CUDA
