// Which CPU GEMM runs: the library, its version and the kernel (instruction set) an f32 matmul
// gets on this machine, against what the CPU supports, and how bf16 GEMMs run (natively or
// through fp32, kernels/gemm.h). `zerolap --version` and the bench's limits
// print describe_cpu_gemm(); rank 0 warns with cpu_gemm_shortfall() (runtime/cli/gemm_check.h).
#pragma once

#include <string>

#include "kernels/cpu_isa.h"

namespace zl {

struct CpuGemmInfo {
  std::string library;     // "oneDNN 2.6.3"
  CpuIsa cpu = CpuIsa::Baseline;       // detect_cpu_isa()
  CpuIsa dispatch = CpuIsa::Baseline;  // the highest level the library will use here (its cap)
  std::string f32_kernel;  // oneDNN's implementation name for an f32 matmul, e.g. "brg:avx512_core"
  CpuIsa f32_kernel_isa = CpuIsa::Baseline;  // the level that kernel is written for
  bool bf16_native = false;  // cpu_gemm_bf16_native(): else bf16 GEMMs run through fp32
};

// Asked once per process (it creates one small matmul primitive).
const CpuGemmInfo& cpu_gemm_info();

// The best level for f32 GEMM on a CPU of level `cpu`: f32 has no use for VNNI, BF16 or AMX, so
// an AVX-512 kernel is the best there is from avx512_core up.
CpuIsa best_f32_gemm_isa(CpuIsa cpu);

// One line: "oneDNN 2.6.3, f32 kernel brg:avx512_core (avx512_core), dispatch up to
// avx512_core_bf16, CPU avx512_core_bf16, bf16 native matmul"; without a bf16 matmul it ends
// "bf16 through fp32 (no native bf16 matmul on this CPU: slower)".
std::string describe_cpu_gemm(const CpuGemmInfo& info);

// Empty when the library uses everything the CPU has; otherwise what falls short and why it
// matters (the library capped below the CPU, e.g. by ONEDNN_MAX_CPU_ISA, or an f32 kernel for an
// older instruction set than the CPU's).
std::string cpu_gemm_shortfall(const CpuGemmInfo& info);

}  // namespace zl
