// Row-major GEMM on cuBLAS: C (m, n) = alpha * op(A) (m, k) * op(B) (k, n) + beta * C, enqueued
// on the handle in ctx.blas, which the caller has bound to ctx.stream. beta == 0 overwrites C
// without reading it (BLAS semantics), as the CPU path. fp32: cublasSgemm in the handle's default
// math (full FP32), or with ctx.gemm_math == Tf32 cublasGemmEx with CUBLAS_COMPUTE_32F_FAST_TF32.
// bf16 inputs: cublasGemmEx with CUDA_R_16BF A and B, CUBLAS_COMPUTE_32F, and an fp32 or bf16 C.
#include <cstdint>
#include <limits>
#include <type_traits>

#include <cublas_v2.h>

#include "base/cuda_check.h"
#include "kernels/cuda_common.cuh"
#include "kernels/cuda_kernels.h"
#include "base/errors.h"

namespace zl {
namespace {

// cuBLAS's classic API takes int dimensions: refuse sizes that would silently wrap.
int to_blas_int(std::int64_t v, const char* what) {
  ZL_CHECK(v >= 0 && v <= std::numeric_limits<int>::max(),
           "gemm_cuda: {} = {} does not fit cuBLAS's int", what, v);
  return static_cast<int>(v);
}

cublasOperation_t to_cublas(Transpose t) { return t == Transpose::No ? CUBLAS_OP_N : CUBLAS_OP_T; }

// c (m, n), row stride ldc, = beta * c; beta == 0 writes zeros without reading c (it may hold NaN).
template <class TC>
__global__ void scale_matrix_kernel(TC* c, std::int64_t m, std::int64_t n, std::int64_t ldc,
                                    float beta) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < m * n; i += stride) {
    TC* e = c + (i / n) * ldc + i % n;
    *e = from_f32<TC>(beta == 0.0f ? 0.0f : beta * to_f32(*e));
  }
}

template <class T>
constexpr cudaDataType_t cuda_type() {
  return std::is_same_v<T, float> ? CUDA_R_32F : CUDA_R_16BF;
}

// The checks and the k == 0 case every GEMM shares; returns the handle, or nullptr when nothing
// is left to do (C empty, or k == 0 and C already scaled).
template <class TC>
cublasHandle_t prepare(const ExecContext& ctx, Transpose trans_a, Transpose trans_b,
                       std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t lda,
                       std::int64_t ldb, float beta, TC* c, std::int64_t ldc) {
  ZL_CHECK(m >= 0 && n >= 0 && k >= 0, "gemm_cuda: negative size m = {}, n = {}, k = {}", m, n, k);
  if (m == 0 || n == 0) return nullptr;
  ZL_CHECK(ctx.blas != nullptr, "gemm_cuda: ExecContext has no cuBLAS handle");
  ZL_CHECK(ldc >= n, "gemm: ldc = {} < n = {}", ldc, n);
  auto* handle = static_cast<cublasHandle_t>(ctx.blas);
  // The handle must be bound to ctx.stream, or the GEMM would race with the kernels around it.
  // Checking is a host-side read; rebinding here would reset a workspace set by the runtime.
  cudaStream_t bound = nullptr;
  ZL_CUBLAS_CHECK(cublasGetStream(handle, &bound));
  ZL_CHECK(bound == static_cast<cudaStream_t>(ctx.stream),
           "gemm_cuda: the cuBLAS handle is bound to another stream than ctx.stream");
  if (k == 0) {
    // op(A) op(B) is the zero matrix: C = beta * C, as the CPU path does. Done here rather than
    // left to cuBLAS, whose leading-dimension checks would reject the lda/ldb of empty operands.
    scale_matrix_kernel<<<cuda_detail::grid_for(m * n), cuda_detail::kThreads, 0,
                          cuda_detail::stream_of(ctx)>>>(c, m, n, ldc, beta);
    ZL_CUDA_CHECK(cudaGetLastError());
    return nullptr;
  }
  ZL_CHECK(lda >= (trans_a == Transpose::No ? k : m), "gemm: lda = {} too small", lda);
  ZL_CHECK(ldb >= (trans_b == Transpose::No ? n : k), "gemm: ldb = {} too small", ldb);
  return handle;
}

// cublasGemmEx, row-major by Note [Row-major on cuBLAS] (B first, then A).
template <class TA, class TC>
void gemm_ex(cublasHandle_t handle, cublasComputeType_t compute, Transpose trans_a,
             Transpose trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
             const TA* a, std::int64_t lda, const TA* b, std::int64_t ldb, float beta, TC* c,
             std::int64_t ldc) {
  ZL_CUBLAS_CHECK(cublasGemmEx(handle, to_cublas(trans_b), to_cublas(trans_a), to_blas_int(n, "n"),
                               to_blas_int(m, "m"), to_blas_int(k, "k"), &alpha, b,
                               cuda_type<TA>(), to_blas_int(ldb, "ldb"), a, cuda_type<TA>(),
                               to_blas_int(lda, "lda"), &beta, c, cuda_type<TC>(),
                               to_blas_int(ldc, "ldc"), compute, CUBLAS_GEMM_DEFAULT));
}

// bf16 inputs, fp32 accumulation; C is fp32 or bf16 (gemm_ex picks the cuBLAS type from C).
template <class C>
void gemm_bf16_inputs(const ExecContext& ctx, Transpose trans_a, Transpose trans_b,
                      std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const Bf16* a,
                      std::int64_t lda, const Bf16* b, std::int64_t ldb, float beta, C* c,
                      std::int64_t ldc) {
  cublasHandle_t handle = prepare(ctx, trans_a, trans_b, m, n, k, lda, ldb, beta, c, ldc);
  if (handle == nullptr) return;
  gemm_ex(handle, CUBLAS_COMPUTE_32F, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c,
          ldc);
}

}  // namespace

// c (m, n), row stride ldc, =/+= per beta; a: (m, k) or, transposed, (k, m) with row stride lda;
// b: (k, n) or, transposed, (n, k) with row stride ldb.
//
// Note [Row-major on cuBLAS]: a row-major matrix with row stride ld is the column-major matrix of
// its transpose with leading dimension ld. So row-major C = op(A) op(B) is column-major
// C^T = op(B)^T op(A)^T: call cuBLAS with the operands swapped (B first), the same op flags, and
// the dimensions (n, m, k). No data moves.
void gemm_cuda(const ExecContext& ctx, Transpose trans_a, Transpose trans_b, std::int64_t m,
               std::int64_t n, std::int64_t k, float alpha, const float* a, std::int64_t lda,
               const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  cublasHandle_t handle = prepare(ctx, trans_a, trans_b, m, n, k, lda, ldb, beta, c, ldc);
  if (handle == nullptr) return;
  if (ctx.gemm_math == GemmMath::Tf32) {
    gemm_ex(handle, CUBLAS_COMPUTE_32F_FAST_TF32, trans_a, trans_b, m, n, k, alpha, a, lda, b,
            ldb, beta, c, ldc);
    return;
  }
  // B comes first, then A (Note [Row-major on cuBLAS]).
  ZL_CUBLAS_CHECK(cublasSgemm(handle, to_cublas(trans_b), to_cublas(trans_a), to_blas_int(n, "n"),
                              to_blas_int(m, "m"), to_blas_int(k, "k"), &alpha, b,
                              to_blas_int(ldb, "ldb"), a, to_blas_int(lda, "lda"), &beta, c,
                              to_blas_int(ldc, "ldc")));
}

void gemm_cuda(const ExecContext& ctx, Transpose trans_a, Transpose trans_b, std::int64_t m,
               std::int64_t n, std::int64_t k, float alpha, const Bf16* a, std::int64_t lda,
               const Bf16* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  gemm_bf16_inputs(ctx, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm_cuda(const ExecContext& ctx, Transpose trans_a, Transpose trans_b, std::int64_t m,
               std::int64_t n, std::int64_t k, float alpha, const Bf16* a, std::int64_t lda,
               const Bf16* b, std::int64_t ldb, float beta, Bf16* c, std::int64_t ldc) {
  gemm_bf16_inputs(ctx, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace zl
