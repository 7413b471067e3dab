// Row-major single-precision GEMM: C = alpha * op(A) * op(B) + beta * C.
// CPU: oneDNN matmul, its kernel chosen from the CPU's instruction set (kernels/gemm_info.h);
// CUDA: cuBLAS on ctx.stream. Shapes: op(A) (m, k), op(B) (k, n), C (m, n); lda/ldb/ldc are row
// strides of the stored (untransposed) matrices.
#pragma once

#include <cstdint>

#include "base/exec_context.h"

namespace zl {

enum class Transpose { No, Yes };

void gemm(const ExecContext& ctx, Transpose trans_a, Transpose trans_b, std::int64_t m,
          std::int64_t n, std::int64_t k, float alpha, const float* a, std::int64_t lda,
          const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc);

// Threads OpenBLAS may use in this process (default 1 per rank: ranks are the parallelism).
void set_cpu_gemm_threads(int threads);

// Whether this build's CPU GEMM has a bf16 path (bf16 inputs, fp32 accumulation): precision.compute
// = "bf16" on the CPU needs one. oneDNN decides by the CPU's instruction set.
bool cpu_gemm_has_bf16();

}  // namespace zl
