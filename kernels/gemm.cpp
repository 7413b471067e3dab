// Row-major single-precision GEMM on the CPU through OpenBLAS, dispatching to cuBLAS (gemm_cuda)
// on CUDA contexts. C = alpha * op(A) * op(B) + beta * C; beta == 0 overwrites C without reading
// it (BLAS semantics), so C may hold garbage (even NaN) when the caller overwrites.
#include "kernels/gemm.h"

#include <cblas.h>

#include <limits>

#include "base/errors.h"
#if defined(ZEROLAP_WITH_CUDA)
#include "kernels/cuda_kernels.h"
#endif

namespace zl {
namespace {

// cblas takes blasint (32-bit in Debian's OpenBLAS): refuse sizes that would silently wrap.
blasint to_blas_int(std::int64_t v, const char* what) {
  ZL_CHECK(v >= 0 && v <= std::numeric_limits<blasint>::max(),
           "gemm: {} = {} does not fit OpenBLAS's index type", what, v);
  return static_cast<blasint>(v);
}

void gemm_cpu(Transpose trans_a, Transpose trans_b, std::int64_t m, std::int64_t n,
              std::int64_t k, float alpha, const float* a, std::int64_t lda, const float* b,
              std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  ZL_CHECK(ldc >= n, "gemm: ldc = {} < n = {}", ldc, n);
  if (k == 0) {
    // op(A) * op(B) is the zero matrix; OpenBLAS rejects lda/ldb < 1, so do C = beta * C here.
    for (std::int64_t i = 0; i < m; ++i) {
      float* row = c + i * ldc;
      for (std::int64_t j = 0; j < n; ++j) row[j] = beta == 0.0f ? 0.0f : beta * row[j];
    }
    return;
  }
  // Row strides of the *stored* matrices: A is (m, k) untransposed or (k, m) transposed.
  ZL_CHECK(lda >= (trans_a == Transpose::No ? k : m), "gemm: lda = {} too small", lda);
  ZL_CHECK(ldb >= (trans_b == Transpose::No ? n : k), "gemm: ldb = {} too small", ldb);
  cblas_sgemm(CblasRowMajor, trans_a == Transpose::No ? CblasNoTrans : CblasTrans,
              trans_b == Transpose::No ? CblasNoTrans : CblasTrans, to_blas_int(m, "m"),
              to_blas_int(n, "n"), to_blas_int(k, "k"), alpha, a, to_blas_int(lda, "lda"), b,
              to_blas_int(ldb, "ldb"), beta, c, to_blas_int(ldc, "ldc"));
}

}  // namespace

void gemm(const ExecContext& ctx, Transpose trans_a, Transpose trans_b, std::int64_t m,
          std::int64_t n, std::int64_t k, float alpha, const float* a, std::int64_t lda,
          const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  if (ctx.device == DeviceKind::Cuda) {
#if defined(ZEROLAP_WITH_CUDA)
    gemm_cuda(ctx, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
#else
    throw_built_without_cuda("gemm");
#endif
  }
  gemm_cpu(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void set_cpu_gemm_threads(int threads) {
  if (threads < 1) throw UserError(fmt::format("gemm threads must be >= 1, got {}", threads));
  // OpenBLAS keeps its thread count process-wide; this is the one knob it offers.
  openblas_set_num_threads(threads);
}

}  // namespace zl
