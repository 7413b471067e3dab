// For the CUDA tests: whether a CUDA device is visible to this process (when none is, it WARNs
// with the reason, so a skipped GPU test is never silent: the skip the design allows, the
// resource is absent by design on CPU-only machines), and CudaEnv, the stream and cuBLAS handle
// the kernel tests run on.
#pragma once

#if defined(ZEROLAP_WITH_CUDA)

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <catch2/catch.hpp>

#include "base/exec_context.h"

namespace zl::test {

inline bool cuda_device_visible() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    (void)cudaGetLastError();  // clear the sticky error so later CUDA calls start clean
    WARN("no CUDA device visible: skipping ("
         << (err != cudaSuccess ? cudaGetErrorString(err) : "0 devices") << ")");
    return false;
  }
  return true;
}

// A non-blocking stream (so nothing relies on implicit legacy-stream ordering) and a cuBLAS
// handle bound to it, as the runtime sets them up.
class CudaEnv {
 public:
  CudaEnv() {
    REQUIRE(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking) == cudaSuccess);
    REQUIRE(cublasCreate(&blas_) == CUBLAS_STATUS_SUCCESS);
    REQUIRE(cublasSetStream(blas_, stream_) == CUBLAS_STATUS_SUCCESS);
  }
  ~CudaEnv() {
    if (blas_ != nullptr) cublasDestroy(blas_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  CudaEnv(const CudaEnv&) = delete;
  CudaEnv& operator=(const CudaEnv&) = delete;

  ExecContext ctx() const { return ExecContext{DeviceKind::Cuda, stream_, blas_}; }
  void sync() const { REQUIRE(cudaStreamSynchronize(stream_) == cudaSuccess); }

 private:
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
};

}  // namespace zl::test

#endif  // ZEROLAP_WITH_CUDA
