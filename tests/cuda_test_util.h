// For the CUDA tests: whether a CUDA device is visible to this process. When none is, it WARNs
// with the reason, so a skipped GPU test is never silent (the skip the design allows: the
// resource is absent by design on CPU-only machines).
#pragma once

#if defined(ZEROLAP_WITH_CUDA)

#include <cuda_runtime.h>

#include <catch2/catch.hpp>

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

}  // namespace zl::test

#endif  // ZEROLAP_WITH_CUDA
