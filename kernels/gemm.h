// Row-major GEMM: C = alpha * op(A) * op(B) + beta * C, accumulating in fp32.
// fp32 A, B, C: CPU oneDNN matmul, its kernel chosen from the CPU's instruction set
// (kernels/gemm_info.h); CUDA cuBLAS, full fp32 or TF32 per ctx.gemm_math.
// bf16 A, B with an fp32 or bf16 C (docs/design.md, "Precision"): CPU oneDNN's bf16 matmul, or
// where it has none A and B widened to fp32 (exact) through its fp32 matmul
// (cpu_gemm_bf16_path); CUDA cublasGemmEx with CUDA_R_16BF inputs and CUBLAS_COMPUTE_32F.
// Products and sums are fp32 and a bf16 C (read widened when beta != 0) is the fp32 result
// rounded once to nearest even. Shapes: op(A) (m, k), op(B) (k, n),
// C (m, n); lda/ldb/ldc are row strides of the stored (untransposed) matrices.
#pragma once

#include <cstdint>

#include "base/bf16.h"
#include "base/exec_context.h"

namespace zl {

enum class Transpose { No, Yes };

void gemm(const ExecContext& ctx, Transpose trans_a, Transpose trans_b, std::int64_t m,
          std::int64_t n, std::int64_t k, float alpha, const float* a, std::int64_t lda,
          const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc);

void gemm(const ExecContext& ctx, Transpose trans_a, Transpose trans_b, std::int64_t m,
          std::int64_t n, std::int64_t k, float alpha, const Bf16* a, std::int64_t lda,
          const Bf16* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc);

void gemm(const ExecContext& ctx, Transpose trans_a, Transpose trans_b, std::int64_t m,
          std::int64_t n, std::int64_t k, float alpha, const Bf16* a, std::int64_t lda,
          const Bf16* b, std::int64_t ldb, float beta, Bf16* c, std::int64_t ldc);

// Threads the CPU GEMM may use in this process (default 1 per rank: ranks are the parallelism).
void set_cpu_gemm_threads(int threads);

// Whether this CPU and oneDNN build have a bf16 matmul (bf16 inputs, fp32 accumulation; oneDNN
// 2.6 needs AVX-512: natively with AVX512-BF16 or AMX, emulated on plain AVX-512). Asked once per
// process.
bool cpu_gemm_bf16_native();

// How the CPU runs bf16 GEMMs: oneDNN's bf16 matmul, or (where it has none, or when forced)
// A and B widened to fp32 through the fp32 matmul: the same semantics, slower. Both are
// deterministic; they may differ from each other in the order of the fp32 sums.
enum class CpuBf16Gemm { Native, ThroughFp32 };
CpuBf16Gemm cpu_gemm_bf16_path();

// Tests: run the bf16 GEMMs through fp32 even where a bf16 matmul exists (so that path is tested
// on every CPU); false restores the default. Process-wide; set it while no GEMM runs.
void force_cpu_gemm_bf16_through_fp32(bool force);

}  // namespace zl
