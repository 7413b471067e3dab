// Device memory for DeviceBuffer (base/device_buffer.cpp dispatches here): zero-filled
// allocation, free, and blocking host <-> device copies. None of these is on the step path.
#include <cstddef>
#include <cstdio>

#include <cuda_runtime.h>

#include "base/cuda_check.h"
#include "base/device_memory.h"

namespace zl {

// Returns `bytes` of device memory, zero-filled (256-byte aligned by cudaMalloc); 0 bytes
// returns nullptr. The zeros are in place on return: cudaMemset may return before it completes and
// does not order itself before work on non-blocking streams, hence the device sync.
void* cuda_alloc_zeroed(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  void* ptr = nullptr;
  ZL_CUDA_CHECK(cudaMalloc(&ptr, bytes));
  const cudaError_t set = cudaMemset(ptr, 0, bytes);
  const cudaError_t done = set == cudaSuccess ? cudaDeviceSynchronize() : set;
  if (done != cudaSuccess) {
    cudaFree(ptr);  // best effort; the failure reported is the memset's
    ZL_CUDA_CHECK(done);
  }
  return ptr;
}

// Frees memory from cuda_alloc_zeroed (null is a no-op). Never throws: it runs in
// ~DeviceBuffer, where an exception would terminate the process and hide the error that is
// usually already propagating (a failed free means the context is broken, and the next checked
// CUDA call reports it). cudaErrorCudartUnloading at process exit is expected and silent.
void cuda_free(void* p) {
  if (p == nullptr) return;
  const cudaError_t err = cudaFree(p);
  if (err != cudaSuccess && err != cudaErrorCudartUnloading) {
    std::fprintf(stderr, "zerolap: cudaFree failed: %s (%s)\n", cudaGetErrorName(err),
                 cudaGetErrorString(err));
  }
}

std::int64_t cuda_free_bytes() {
  std::size_t free = 0, total = 0;
  ZL_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return static_cast<std::int64_t>(free);
}

// Note [Blocking copies]: cudaMemcpy runs on the legacy default stream, which does not order
// itself after streams created with cudaStreamNonBlocking (or a per-thread default stream). A
// device-wide sync first makes the copy see every kernel enqueued before it on any stream (and,
// copying to the device, keeps it from racing a kernel still using dst). These copies serve
// checkpoints, tests and set-up, never the step loop, so the full sync is affordable.

// host_dst (bytes) = src (bytes, device).
void cuda_copy_to_host(const void* src, void* host_dst, std::size_t bytes) {
  if (bytes == 0) return;
  ZL_CUDA_CHECK(cudaDeviceSynchronize());
  ZL_CUDA_CHECK(cudaMemcpy(host_dst, src, bytes, cudaMemcpyDeviceToHost));
}

// dst (bytes, device) = host_src (bytes); complete on return.
void cuda_copy_from_host(const void* host_src, void* dst, std::size_t bytes) {
  if (bytes == 0) return;
  ZL_CUDA_CHECK(cudaDeviceSynchronize());
  ZL_CUDA_CHECK(cudaMemcpy(dst, host_src, bytes, cudaMemcpyHostToDevice));
  // A pageable host -> device cudaMemcpy may return once the data is staged, before it lands;
  // synchronise so "blocking" means the device holds the data.
  ZL_CUDA_CHECK(cudaDeviceSynchronize());
}

// Checkpoint staging (base/staging_copy.h): a non-blocking stream of its own, so the copies queue
// behind no training work; the device is synchronised once when it is made (the state it copies
// is quiescent from then on).
void* cuda_staging_stream_create() {
  ZL_CUDA_CHECK(cudaDeviceSynchronize());
  cudaStream_t stream = nullptr;
  ZL_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  return stream;
}

void cuda_staging_stream_destroy(void* stream) {
  if (stream) cudaStreamDestroy(static_cast<cudaStream_t>(stream));  // never throws: destructors
}

void cuda_staging_copy_to_host(void* stream, const void* src, void* host_dst, std::size_t bytes) {
  if (bytes == 0) return;
  ZL_CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost,
                                static_cast<cudaStream_t>(stream)));
}

void cuda_staging_stream_wait(void* stream) {
  ZL_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
}

}  // namespace zl
