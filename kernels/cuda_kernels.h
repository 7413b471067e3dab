// CUDA implementations of the kernels/ entry points, declared for the dispatchers (built only with
// ZEROLAP_WITH_CUDA). Each `name_cuda` has the same contract as `name` in its public header and is
// enqueued on the cudaStream_t in ctx.stream (cuBLAS: the handle in ctx.blas, bound to that stream).
// Functions that return a host value (losses, sum_of_squares, take_device_sums) wait for
// ctx.stream: the step path calls them at most once per step (the clip norm) or per log window.
#pragma once

#if defined(ZEROLAP_WITH_CUDA)

#include <cstdint>

#include "kernels/elementwise.h"
#include "base/exec_context.h"
#include "kernels/gemm.h"
#include "kernels/optim_math.h"
#include "kernels/optimizer_kernels.h"

namespace zl {

void gemm_cuda(const ExecContext& ctx, Transpose trans_a, Transpose trans_b, std::int64_t m,
               std::int64_t n, std::int64_t k, float alpha, const float* a, std::int64_t lda,
               const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc);
void gemm_cuda(const ExecContext& ctx, Transpose trans_a, Transpose trans_b, std::int64_t m,
               std::int64_t n, std::int64_t k, float alpha, const Bf16* a, std::int64_t lda,
               const Bf16* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc);
void gemm_cuda(const ExecContext& ctx, Transpose trans_a, Transpose trans_b, std::int64_t m,
               std::int64_t n, std::int64_t k, float alpha, const Bf16* a, std::int64_t lda,
               const Bf16* b, std::int64_t ldb, float beta, Bf16* c, std::int64_t ldc);

// The element-wise kernels are templates on the storage type T (float or Bf16), instantiated for
// both in kernels/elementwise*.cu.
template <class T>
void bias_activation_forward_cuda(const ExecContext& ctx, Activation act, const T* x,
                                  const T* bias, T* y, std::int64_t rows, std::int64_t cols);
template <class T>
void activation_backward_cuda(const ExecContext& ctx, Activation act, const T* pre, const T* dy,
                              T* dx, std::int64_t n);
template <class T>
void bias_backward_cuda(const ExecContext& ctx, const T* dy, float* dbias, std::int64_t rows,
                        std::int64_t cols, Accumulate acc);
template <class T>
void add_cuda(const ExecContext& ctx, const T* a, const T* b, T* out, std::int64_t n);
template <class T>
void accumulate_cuda(const ExecContext& ctx, const T* a, T* out, std::int64_t n, Accumulate acc);
template <class T>
void layernorm_forward_cuda(const ExecContext& ctx, const T* x, const T* gamma, const T* beta,
                            T* y, float* mean, float* rstd, std::int64_t rows, std::int64_t cols,
                            float eps);
template <class T>
void layernorm_backward_cuda(const ExecContext& ctx, const T* x, const T* gamma,
                             const float* mean, const float* rstd, const T* dy, T* dx,
                             float* dgamma, float* dbeta, std::int64_t rows, std::int64_t cols,
                             Accumulate acc);
template <class T>
double softmax_cross_entropy_cuda(const ExecContext& ctx, const T* logits,
                                  const std::int32_t* labels, std::int64_t rows, std::int64_t cols,
                                  T* dlogits, float grad_scale, std::int64_t* correct);
template <class T>
double squared_error_cuda(const ExecContext& ctx, const T* pred, const float* target,
                          std::int64_t n, T* dpred, float grad_scale);
template <class T>
double sum_of_squares_cuda(const ExecContext& ctx, const T* x, std::int64_t n);
template <class T>
void scale_cuda(const ExecContext& ctx, T* x, std::int64_t n, float alpha);
void zero_fill_cuda(const ExecContext& ctx, float* x, std::int64_t n);
void cast_cuda(const ExecContext& ctx, const float* src, Bf16* dst, std::int64_t n);
void cast_cuda(const ExecContext& ctx, const Bf16* src, float* dst, std::int64_t n);
template <class T>
void softmax_cross_entropy_accumulate_cuda(const ExecContext& ctx, const T* logits,
                                           const std::int32_t* labels, std::int64_t rows,
                                           std::int64_t cols, T* dlogits, float grad_scale,
                                           double* sums);
template <class T>
void squared_error_accumulate_cuda(const ExecContext& ctx, const T* pred, const float* target,
                                   std::int64_t n, T* dpred, float grad_scale, double divisor,
                                   double* sums);
void take_device_sums_cuda(const ExecContext& ctx, double* sums, double* host, int count);
template <class T>
double total_sum_of_squares_cuda(const ExecContext& ctx, const ReadSpan<T>* spans,
                                 std::int64_t count);

void adam_step_cuda(const ExecContext& ctx, float* p, const float* g, float* m, float* v,
                    std::int64_t n, const AdamStep& step);
void sgd_step_cuda(const ExecContext& ctx, float* p, const float* g, float* momentum_buffer,
                   std::int64_t n, const SgdStep& step);
void adam_step_bf16_cuda(const ExecContext& ctx, const Bf16OptimizerSlice& slice, std::int64_t n,
                         const AdamStep& step);
void sgd_step_bf16_cuda(const ExecContext& ctx, const Bf16OptimizerSlice& slice, std::int64_t n,
                        const SgdStep& step);

}  // namespace zl

#endif  // ZEROLAP_WITH_CUDA
