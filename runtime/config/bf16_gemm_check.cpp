// bf16 GEMMs where the run's GEMMs are (see bf16_gemm_check.h).
#include "runtime/config/bf16_gemm_check.h"

#include <fmt/format.h>

#include "base/errors.h"
#include "kernels/gemm.h"

namespace zl {

std::string bf16_gemm_refusal(DeviceChoice device, bool cpu_has_bf16, bool cuda_built) {
  if (cpu_has_bf16 || device == DeviceChoice::Cuda) return "";
  if (device == DeviceChoice::Auto && cuda_built) return "";  // decided once the device is chosen
  return fmt::format(
      "\"bf16\" needs a bf16 GEMM on the CPU (runtime.device = \"{}\"{}), and this CPU's oneDNN "
      "has none (its bf16 matmul needs AVX-512); use compute = \"fp32\"{}",
      to_string(device), device == DeviceChoice::Auto ? " in a build without CUDA" : "",
      cuda_built ? " or runtime.device = \"cuda\"" : " or a build with CUDA");
}

bool cuda_backend_built() {
#if defined(ZEROLAP_WITH_CUDA)
  return true;
#else
  return false;
#endif
}

void check_bf16_gemm(const Config& config, const char* key, ComputePrecision compute,
                     DeviceKind device) {
  if (compute != ComputePrecision::Bf16 || device == DeviceKind::Cuda) return;
  const std::string why = bf16_gemm_refusal(DeviceChoice::Cpu, cpu_gemm_has_bf16(),
                                            cuda_backend_built());
  if (why.empty()) return;
  throw UserError(fmt::format("{}: {}: {}{}", config.source_path, key, why,
                              config.runtime.device == DeviceChoice::Auto
                                  ? " (runtime.device = \"auto\" chose the CPU)"
                                  : ""));
}

}  // namespace zl
