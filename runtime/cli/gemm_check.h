// What `zerolap` says about its CPU GEMM: the --version text, and rank 0's one warning when the
// GEMM kernel is for an older instruction set than the CPU's (kernels/gemm_info.h).
#pragma once

#include <string>

#include "runtime/config/config.h"
#include "runtime/comm/world.h"

namespace zl {

// "zerolap 0.1.0\nCPU GEMM: oneDNN 2.6.3, f32 kernel ..., CPU ...".
std::string version_text();

// Rank 0 prints cpu_gemm_shortfall() to stderr, at most once per process, when `config` runs the
// CPU GEMM (runtime.device is not "cuda"; the bench's limits always do); and, once, that bf16
// GEMMs run through fp32 (slower) when `config` computes in bf16 on a CPU without a bf16 matmul
// (runtime.device "cpu", or "auto" in a build without CUDA). Not collective.
enum class GemmUse { Training, Bench };
void warn_if_cpu_gemm_falls_short(const World& world, const Config& config, GemmUse use);

}  // namespace zl
