// version_text and the once-per-process CPU GEMM warning (runtime/cli/gemm_check.h).
#include "runtime/cli/gemm_check.h"

#include <atomic>
#include <cstdio>

#include <fmt/format.h>

#include "kernels/gemm_info.h"

namespace zl {

std::string version_text() {
  return fmt::format("zerolap {}\nCPU GEMM: {}", ZEROLAP_VERSION,
                     describe_cpu_gemm(cpu_gemm_info()));
}

void warn_if_cpu_gemm_falls_short(const World& world, const Config& config, GemmUse use) {
  if (!world.is_root()) return;
  if (use == GemmUse::Training && config.runtime.device == DeviceChoice::Cuda) return;
  static std::atomic<bool> warned{false};
  const std::string shortfall = cpu_gemm_shortfall(cpu_gemm_info());
  if (shortfall.empty() || warned.exchange(true)) return;
  fmt::print(stderr, "zerolap: warning: {} ({})\n", shortfall, describe_cpu_gemm(cpu_gemm_info()));
  std::fflush(stderr);
}

}  // namespace zl
