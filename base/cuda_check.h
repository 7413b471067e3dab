// Check macros for CUDA runtime and cuBLAS calls (built only with ZEROLAP_WITH_CUDA).
// Each evaluates `expr` once and, on failure, throws zl::RuntimeFailure naming file:line, the
// expression text and the library's error name and string; the runtime's top-level handler adds
// the rank. ZL_NCCL_CHECK lives with the NCCL communicator (runtime/comm/backends/nccl_check.h). Host-only; usable from .cpp (C++20) and .cu (C++17) files.
#pragma once

#if defined(ZEROLAP_WITH_CUDA)

#include <string>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "base/errors.h"

namespace zl::detail {

[[noreturn]] inline void throw_gpu_failure(const char* library, const char* expr, const char* file,
                                           int line, const std::string& error) {
  throw RuntimeFailure(std::string(file) + ":" + std::to_string(line) + ": " + library +
                       " call failed: " + expr + ": " + error);
}

inline std::string cuda_error_text(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")";
}

inline std::string cublas_error_text(cublasStatus_t s) {
  return std::string(cublasGetStatusName(s)) + " (" + cublasGetStatusString(s) + ")";
}

}  // namespace zl::detail

// ZL_CUDA_CHECK(cudaMemcpy(...)); also `ZL_CUDA_CHECK(cudaGetLastError())` after a launch.
#define ZL_CUDA_CHECK(expr)                                                                    \
  do {                                                                                         \
    const cudaError_t zl_cuda_err_ = (expr);                                                   \
    if (zl_cuda_err_ != cudaSuccess) {                                                         \
      ::zl::detail::throw_gpu_failure("CUDA", #expr, __FILE__, __LINE__,                       \
                                      ::zl::detail::cuda_error_text(zl_cuda_err_));            \
    }                                                                                          \
  } while (0)

#define ZL_CUBLAS_CHECK(expr)                                                                  \
  do {                                                                                         \
    const cublasStatus_t zl_cublas_status_ = (expr);                                           \
    if (zl_cublas_status_ != CUBLAS_STATUS_SUCCESS) {                                          \
      ::zl::detail::throw_gpu_failure("cuBLAS", #expr, __FILE__, __LINE__,                     \
                                      ::zl::detail::cublas_error_text(zl_cublas_status_));     \
    }                                                                                          \
  } while (0)

#endif  // ZEROLAP_WITH_CUDA
