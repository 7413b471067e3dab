// ZL_NCCL_CHECK: the NCCL twin of base/cuda_check.h's macros (CUDA builds only), kept beside the
// NCCL communicator so that no layer below runtime/comm includes <nccl.h>.
#pragma once

#if defined(ZEROLAP_WITH_CUDA)

#include <string>

#include <nccl.h>

#include "base/cuda_check.h"

namespace zl::detail {

// ncclGetLastError(nullptr) holds the most recent detailed message of this thread (e.g. which
// peer or transport failed), which the bare result code does not say.
inline std::string nccl_error_text(ncclResult_t r) {
  std::string text = ncclGetErrorString(r);
  const char* last = ncclGetLastError(nullptr);
  if (last != nullptr && last[0] != '\0') text += std::string(": ") + last;
  return text;
}

}  // namespace zl::detail

// Only ncclSuccess passes. A call on a non-blocking communicator, which may answer
// ncclInProgress, goes through the communicator's settle() instead, which waits until it is done
// (Note [Non-blocking NCCL]): taking ncclInProgress for success would let the next call, or an
// event recorded after it, run before NCCL has enqueued its kernel.
#define ZL_NCCL_CHECK(expr)                                                                    \
  do {                                                                                         \
    const ncclResult_t zl_nccl_result_ = (expr);                                               \
    if (zl_nccl_result_ != ncclSuccess) {                                                      \
      ::zl::detail::throw_gpu_failure("NCCL", #expr, __FILE__, __LINE__,                       \
                                      ::zl::detail::nccl_error_text(zl_nccl_result_));         \
    }                                                                                          \
  } while (0)

#endif  // ZEROLAP_WITH_CUDA
