// Check macros for CUDA runtime, cuBLAS and NCCL calls (built only with ZEROLAP_WITH_CUDA).
// Each evaluates `expr` once and, on failure, throws zl::RuntimeFailure naming file:line, the
// expression text and the library's error name and string; the runtime's top-level handler adds
// the rank. Host-only; usable from .cpp (C++20) and .cu (C++17) files.
#pragma once

#if defined(ZEROLAP_WITH_CUDA)

#include <string>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include "kernels/errors.h"

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

// ncclGetLastError(nullptr) holds the most recent detailed message of this thread (e.g. which
// peer or transport failed), which the bare result code does not say.
inline std::string nccl_error_text(ncclResult_t r) {
  std::string text = ncclGetErrorString(r);
  const char* last = ncclGetLastError(nullptr);
  if (last != nullptr && last[0] != '\0') text += std::string(": ") + last;
  return text;
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

// ncclInProgress is not a failure: it is the normal result of non-blocking communicators.
#define ZL_NCCL_CHECK(expr)                                                                    \
  do {                                                                                         \
    const ncclResult_t zl_nccl_result_ = (expr);                                               \
    if (zl_nccl_result_ != ncclSuccess && zl_nccl_result_ != ncclInProgress) {                 \
      ::zl::detail::throw_gpu_failure("NCCL", #expr, __FILE__, __LINE__,                       \
                                      ::zl::detail::nccl_error_text(zl_nccl_result_));         \
    }                                                                                          \
  } while (0)

#endif  // ZEROLAP_WITH_CUDA
