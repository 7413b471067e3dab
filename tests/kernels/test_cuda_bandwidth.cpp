// A measurement, not a check of results: the device's copy bandwidth (cudaMemcpy device to
// device, counted as bytes read + written) and the fused Adam kernel's (28 bytes per parameter:
// reads p, g, m, v, writes p, m, v), and their ratio. scripts/gpu_check.sh runs it and parses the
// GPU_BANDWIDTH line. Hidden ([.]) from plain runs of the unit tests; needs CUDA and a GPU, and
// skips with a printed reason without one.
#include <catch2/catch.hpp>

#include "cuda_test_util.h"

#if defined(ZEROLAP_WITH_CUDA)

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

#include "base/device_buffer.h"
#include "kernels/optimizer_kernels.h"

namespace {

#define BW_REQUIRE_CUDA(expr) REQUIRE((expr) == cudaSuccess)

// Milliseconds per call of `fn` on `stream`, over `reps` calls after one warm-up call.
template <typename Fn>
double ms_per_call(cudaStream_t stream, int reps, Fn&& fn) {
  cudaEvent_t start = nullptr, end = nullptr;
  BW_REQUIRE_CUDA(cudaEventCreate(&start));
  BW_REQUIRE_CUDA(cudaEventCreate(&end));
  fn();
  BW_REQUIRE_CUDA(cudaEventRecord(start, stream));
  for (int i = 0; i < reps; ++i) fn();
  BW_REQUIRE_CUDA(cudaEventRecord(end, stream));
  BW_REQUIRE_CUDA(cudaEventSynchronize(end));
  float ms = 0.0f;
  BW_REQUIRE_CUDA(cudaEventElapsedTime(&ms, start, end));
  cudaEventDestroy(start);
  cudaEventDestroy(end);
  return static_cast<double>(ms) / reps;
}

}  // namespace

TEST_CASE("GPU copy bandwidth vs the fused Adam kernel", "[.][gpu-bandwidth]") {
  if (!zl::test::cuda_device_visible()) return;
  // 64 Mi floats (256 MiB) per buffer: far beyond any cache, 1 GiB for Adam's four tensors.
  constexpr std::int64_t kN = std::int64_t{1} << 26;
  constexpr int kReps = 20;
  cudaStream_t stream = nullptr;
  BW_REQUIRE_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  zl::DeviceBuffer p(zl::DeviceKind::Cuda, kN), g(zl::DeviceKind::Cuda, kN),
      m(zl::DeviceKind::Cuda, kN), v(zl::DeviceKind::Cuda, kN);
  const double bytes = static_cast<double>(kN) * sizeof(float);

  const double copy_ms = ms_per_call(stream, kReps, [&] {
    BW_REQUIRE_CUDA(cudaMemcpyAsync(g.data(), p.data(), static_cast<std::size_t>(bytes),
                                    cudaMemcpyDeviceToDevice, stream));
  });
  const zl::ExecContext ctx{zl::DeviceKind::Cuda, stream, nullptr};
  const zl::AdamStep step = zl::make_adam_step(zl::AdamHyper{}, 1e-3f, 1, 1.0f);
  const double adam_ms = ms_per_call(stream, kReps, [&] {
    zl::adam_step(ctx, p.data(), g.data(), m.data(), v.data(), kN, step);
  });
  BW_REQUIRE_CUDA(cudaStreamSynchronize(stream));
  BW_REQUIRE_CUDA(cudaStreamDestroy(stream));

  cudaDeviceProp prop{};
  int device = 0;
  BW_REQUIRE_CUDA(cudaGetDevice(&device));
  BW_REQUIRE_CUDA(cudaGetDeviceProperties(&prop, device));
  const double copy_gbps = 2.0 * bytes / (copy_ms * 1e-3) / 1e9;  // read + write
  const double adam_gbps = 7.0 * bytes / (adam_ms * 1e-3) / 1e9;  // 28 bytes per parameter
  std::printf(
      "GPU_BANDWIDTH device=\"%s\" elements=%lld copy_ms=%.4f copy_GBps=%.1f adam_ms=%.4f "
      "adam_GBps=%.1f adam_fraction_of_copy=%.3f\n",
      prop.name, static_cast<long long>(kN), copy_ms, copy_gbps, adam_ms, adam_gbps,
      adam_gbps / copy_gbps);
  std::fflush(stdout);
  CHECK(copy_gbps > 0.0);
  CHECK(adam_gbps > 0.0);
}

#else

TEST_CASE("the GPU bandwidth measurement is not built", "[gpu-bandwidth]") {
  WARN("built without CUDA (ZEROLAP_CUDA=OFF or nvcc not found): GPU bandwidth not measured");
}

#endif  // ZEROLAP_WITH_CUDA
