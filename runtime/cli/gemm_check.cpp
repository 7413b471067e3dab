// version_text and the once-per-process CPU GEMM warning (runtime/cli/gemm_check.h).
#include "runtime/cli/gemm_check.h"

#include <algorithm>
#include <atomic>
#include <cstdio>

#include <fmt/format.h>

#include "kernels/gemm.h"
#include "kernels/gemm_info.h"

namespace zl {

std::string version_text() {
  return fmt::format("zerolap {}\nCPU GEMM: {}", ZEROLAP_VERSION,
                     describe_cpu_gemm(cpu_gemm_info()));
}

namespace {

bool on_cpu_for_sure(DeviceChoice device) {
#if defined(ZEROLAP_WITH_CUDA)
  return device == DeviceChoice::Cpu;
#else
  return device != DeviceChoice::Cuda;
#endif
}

// bf16 runs everywhere, but a user should know when its GEMMs are emulated (kernels/gemm.h).
void note_bf16_through_fp32(const Config& config, GemmUse use) {
  const auto& list = config.bench.precision;
  const bool bf16 = use == GemmUse::Training
                        ? config.precision.compute == ComputePrecision::Bf16
                        : std::find(list.begin(), list.end(), ComputePrecision::Bf16) != list.end();
  if (!bf16 || !on_cpu_for_sure(config.runtime.device)) return;
  if (cpu_gemm_bf16_path() != CpuBf16Gemm::ThroughFp32) return;
  static std::atomic<bool> noted{false};
  if (noted.exchange(true)) return;
  fmt::print(stderr,
             "zerolap: note: this CPU has no native bf16 matmul (oneDNN's needs AVX-512): bf16 "
             "GEMMs run through fp32 (bf16 inputs, fp32 accumulation, as elsewhere), slower\n");
  std::fflush(stderr);
}

}  // namespace

void warn_if_cpu_gemm_falls_short(const World& world, const Config& config, GemmUse use) {
  if (!world.is_root()) return;
  note_bf16_through_fp32(config, use);
  if (use == GemmUse::Training && config.runtime.device == DeviceChoice::Cuda) return;
  static std::atomic<bool> warned{false};
  const std::string shortfall = cpu_gemm_shortfall(cpu_gemm_info());
  if (shortfall.empty() || warned.exchange(true)) return;
  fmt::print(stderr, "zerolap: warning: {} ({})\n", shortfall, describe_cpu_gemm(cpu_gemm_info()));
  std::fflush(stderr);
}

}  // namespace zl
