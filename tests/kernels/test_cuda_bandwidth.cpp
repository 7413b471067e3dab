// A measurement, not a check of results: the device's copy bandwidth (cudaMemcpy device to
// device, counted as bytes read + written) and the fused Adam kernel's (28 bytes per parameter:
// reads p, g, m, v, writes p, m, v), and their ratio; then the fused bf16 Adam kernel with fp32
// masters and bf16 gradients (28 bytes per parameter: reads g (2), master, m, v; writes master,
// m, v and the bf16 parameter (2)), whose target is >= 85% of the copy bandwidth.
// scripts/gpu_check.sh runs it and prints the GPU_BANDWIDTH lines. Hidden ([.]) from plain runs of the unit tests; needs CUDA and a GPU, and
// skips with a printed reason without one.
#include <catch2/catch.hpp>

#include "cuda_test_util.h"

#if defined(ZEROLAP_WITH_CUDA)

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

#include "base/bf16.h"
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

  // bf16 parameters and gradients live in the first halves of g's and p's fp32 allocations (same
  // alignment); the master, m and v are the fp32 buffers.
  cudaStream_t stream16 = nullptr;
  BW_REQUIRE_CUDA(cudaStreamCreateWithFlags(&stream16, cudaStreamNonBlocking));
  zl::DeviceBuffer master(zl::DeviceKind::Cuda, kN), param16(zl::DeviceKind::Cuda, kN / 2),
      grad16(zl::DeviceKind::Cuda, kN / 2);
  zl::Bf16OptimizerSlice slice;
  slice.grad = grad16.data();
  slice.grad_dtype = zl::DType::BF16;
  slice.param = reinterpret_cast<zl::Bf16*>(param16.data());
  slice.master_weights = zl::MasterWeights::Fp32;
  slice.master = master.data();
  slice.m = m.data();
  slice.v = v.data();
  const zl::ExecContext ctx16{zl::DeviceKind::Cuda, stream16, nullptr};
  const double bf16_ms = ms_per_call(stream16, kReps, [&] {
    zl::adam_step_bf16(ctx16, slice, kN, step);
  });
  BW_REQUIRE_CUDA(cudaStreamSynchronize(stream16));
  BW_REQUIRE_CUDA(cudaStreamDestroy(stream16));
  const std::int64_t per_element = zl::optimizer_step_bytes_per_element(
      zl::OptimizerKind::Adam, false, zl::DType::BF16, zl::MasterWeights::Fp32, zl::DType::BF16);
  const double bf16_gbps =
      static_cast<double>(per_element) * static_cast<double>(kN) / (bf16_ms * 1e-3) / 1e9;
  std::printf(
      "GPU_BANDWIDTH_BF16 device=\"%s\" elements=%lld bytes_per_element=%lld adam_bf16_ms=%.4f "
      "adam_bf16_GBps=%.1f adam_bf16_fraction_of_copy=%.3f target=0.85\n",
      prop.name, static_cast<long long>(kN), static_cast<long long>(per_element), bf16_ms,
      bf16_gbps, bf16_gbps / copy_gbps);
  std::fflush(stdout);
  CHECK(bf16_gbps > 0.0);
}

#else

TEST_CASE("the GPU bandwidth measurement is not built", "[gpu-bandwidth]") {
  WARN("built without CUDA (ZEROLAP_CUDA=OFF or nvcc not found): GPU bandwidth not measured");
}

#endif  // ZEROLAP_WITH_CUDA
