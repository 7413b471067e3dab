// cpu_gemm_info: oneDNN's version and effective ISA (dnnl::get_effective_cpu_isa, lowered by the
// user's ONEDNN_MAX_CPU_ISA), and the implementation it picks for a representative f32 matmul.
#include "kernels/gemm_info.h"

#include <algorithm>

#include <fmt/format.h>

#include "kernels/gemm.h"
#include "kernels/gemm_onednn.h"

namespace zl {
namespace {

CpuIsa from_onednn(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::avx512_core_amx: return CpuIsa::Avx512CoreAmx;
    case dnnl::cpu_isa::avx512_core_bf16: return CpuIsa::Avx512CoreBf16;
    case dnnl::cpu_isa::avx512_core_vnni: return CpuIsa::Avx512CoreVnni;
    case dnnl::cpu_isa::avx512_core: return CpuIsa::Avx512Core;
    case dnnl::cpu_isa::avx2_vnni:
    case dnnl::cpu_isa::avx2: return CpuIsa::Avx2;
    case dnnl::cpu_isa::avx: return CpuIsa::Avx;
    default: return CpuIsa::Baseline;  // sse41, the Xeon Phi levels, "all"
  }
}

CpuGemmInfo query() {
  CpuGemmInfo info;
  const dnnl_version_t* v = dnnl_version();
  info.library = fmt::format("oneDNN {}.{}.{}", v->major, v->minor, v->patch);
  info.cpu = detect_cpu_isa();
  info.dispatch = from_onednn(dnnl::get_effective_cpu_isa());
  // The layers' forward shape (x W^T) at a typical size; oneDNN picks per shape, but one kernel
  // family (and its ISA) serves every f32 shape the models use.
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  const dnnl::memory::dim m = 64, n = 256, k = 256;
  const dnnl::matmul::primitive_desc pd(
      dnnl::matmul::desc(dnnl::memory::desc({m, k}, dt::f32, tag::ab),
                         dnnl::memory::desc({k, n}, dt::f32, tag::ba),
                         dnnl::memory::desc({m, n}, dt::f32, tag::ab)),
      cpu_gemm_engine());
  info.f32_kernel = pd.impl_info_str();
  // "brg:avx512_core", "jit:avx2" name their level; "gemm:jit" runs oneDNN's JIT sgemm, which
  // dispatches on the effective ISA itself; "ref" is the plain C++ reference.
  if (const auto named = cpu_isa_named_in(info.f32_kernel)) {
    info.f32_kernel_isa = *named;
  } else if (info.f32_kernel.find("jit") != std::string::npos) {
    info.f32_kernel_isa = best_f32_gemm_isa(info.dispatch);
  } else {
    info.f32_kernel_isa = CpuIsa::Baseline;
  }
  info.bf16_native = cpu_gemm_bf16_native();
  return info;
}

}  // namespace

const CpuGemmInfo& cpu_gemm_info() {
  static const CpuGemmInfo info = query();
  return info;
}

CpuIsa best_f32_gemm_isa(CpuIsa cpu) { return std::min(cpu, CpuIsa::Avx512Core); }

std::string describe_cpu_gemm(const CpuGemmInfo& info) {
  return fmt::format("{}, f32 kernel {} ({}), dispatch up to {}, CPU {}, {}", info.library,
                     info.f32_kernel, cpu_isa_name(info.f32_kernel_isa),
                     cpu_isa_name(info.dispatch), cpu_isa_name(info.cpu),
                     info.bf16_native
                         ? "bf16 native matmul"
                         : "bf16 through fp32 (no native bf16 matmul on this CPU: slower)");
}

std::string cpu_gemm_shortfall(const CpuGemmInfo& info) {
  if (info.f32_kernel_isa < best_f32_gemm_isa(info.cpu)) {
    return fmt::format(
        "the CPU GEMM runs an f32 kernel for {} ({}) on a CPU with {}: training and the bench's "
        "GEMM limit run below the machine's speed{}",
        cpu_isa_name(info.f32_kernel_isa), info.f32_kernel, cpu_isa_name(info.cpu),
        info.dispatch < info.cpu ? "; is ONEDNN_MAX_CPU_ISA set?" : "");
  }
  if (info.dispatch < info.cpu) {
    return fmt::format(
        "{} dispatches only up to {} on a CPU with {} (is ONEDNN_MAX_CPU_ISA set, or is the library "
        "older than the CPU?): bf16 and int8 kernels run below the machine's speed",
        info.library, cpu_isa_name(info.dispatch), cpu_isa_name(info.cpu));
  }
  return {};
}

}  // namespace zl
