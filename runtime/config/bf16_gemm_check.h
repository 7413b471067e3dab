// Whether a run that computes in bf16 has a bf16 GEMM where its GEMMs run: on CUDA (cuBLAS) always,
// on the CPU only where oneDNN has a bf16 matmul (AVX-512). runtime.device = "auto" is decided at
// parse time in a build without CUDA (it can only be the CPU) and, in one with CUDA, once the
// device is chosen (the Trainer and the bench's limits call check_bf16_gemm).
#pragma once

#include <string>

#include "base/exec_context.h"
#include "runtime/config/config.h"

namespace zl {

// Why bf16 GEMMs cannot run on `device`, or "" when they can (or when "auto" leaves it open).
// `cpu_has_bf16`: cpu_gemm_has_bf16(); `cuda_built`: this build has the CUDA backend.
std::string bf16_gemm_refusal(DeviceChoice device, bool cpu_has_bf16, bool cuda_built);

// Whether this build has the CUDA backend (ZEROLAP_WITH_CUDA).
bool cuda_backend_built();

// Once runtime.device is resolved to `device`: a UserError naming `key` (precision.compute or
// bench.precision) and config.source_path when `compute` is bf16 and `device` has no bf16 GEMM.
void check_bf16_gemm(const Config& config, const char* key, ComputePrecision compute,
                     DeviceKind device);

}  // namespace zl
