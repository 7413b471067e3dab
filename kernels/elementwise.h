// Element-wise and row-wise kernels of the MLP layers and losses. Every function dispatches on
// ctx.device. Matrices are row-major (rows, cols) and contiguous. "=" overwrites, "+=" accumulates.
//
// Storage type T: float (fp32 and tf32 models) or Bf16 (bf16 models; docs/design.md, "Precision").
// Activations, their gradients and parameters are T; arithmetic is fp32 and every sum (bias and
// LayerNorm parameter gradients, LayerNorm statistics, losses) accumulates in fp32 or double, so
// a bf16 result differs from the fp32 one by the rounding of its inputs and outputs only.
// Parameter gradients (dbias, dgamma, dbeta) and LayerNorm statistics (mean, rstd) are always
// fp32: they go to the fp32 gradient buffer. The T = float instances are exactly the fp32 kernels.
#pragma once

#include <cstdint>

#include "base/bf16.h"
#include "base/exec_context.h"

namespace zl {

enum class Activation { Identity, Relu, Gelu, Tanh };  // Gelu: the tanh approximation

// An optional pointer parameter (may be nullptr) takes its type from the other arguments.
template <class T>
struct TypeIdentity {
  using type = T;
};
template <class T>
using NoDeduce = typename TypeIdentity<T>::type;

// y (rows, cols) = act(x + bias[cols]); x and y may alias. `bias` may be null (no bias).
template <class T>
void bias_activation_forward(const ExecContext& ctx, Activation act, const T* x,
                             const NoDeduce<T>* bias, T* y, std::int64_t rows, std::int64_t cols);

// dx (n) = dy * act'(pre) where pre is the pre-activation input (x + bias); dx may alias dy.
template <class T>
void activation_backward(const ExecContext& ctx, Activation act, const T* pre, const T* dy, T* dx,
                         std::int64_t n);

// dbias (cols, fp32) =/+= column sums of dy (rows, cols).
template <class T>
void bias_backward(const ExecContext& ctx, const T* dy, float* dbias, std::int64_t rows,
                   std::int64_t cols, Accumulate acc);

// out (n) = a + b (residual add); out may alias a or b.
template <class T>
void add(const ExecContext& ctx, const T* a, const T* b, T* out, std::int64_t n);

// out (n) =/+= a (gradient fan-in of a residual branch).
template <class T>
void accumulate(const ExecContext& ctx, const T* a, T* out, std::int64_t n, Accumulate acc);

// LayerNorm over the last dimension: y = (x - mean) * rstd * gamma + beta.
// Saves mean (rows) and rstd (rows), fp32, for the backward.
template <class T>
void layernorm_forward(const ExecContext& ctx, const T* x, const T* gamma, const T* beta, T* y,
                       float* mean, float* rstd, std::int64_t rows, std::int64_t cols, float eps);

// dx (rows, cols) = ; dgamma, dbeta (cols, fp32) =/+= according to `acc`.
template <class T>
void layernorm_backward(const ExecContext& ctx, const T* x, const T* gamma, const float* mean,
                        const float* rstd, const T* dy, T* dx, float* dgamma, float* dbeta,
                        std::int64_t rows, std::int64_t cols, Accumulate acc);

// The three reductions below return a value to the host, so on CUDA they wait for ctx.stream,
// for at most ctx.host_wait_timeout_s when it is set (Note [Host read-backs] in
// elementwise_reductions.cu).

// Softmax cross-entropy over logits (rows, cols) with integer labels (rows).
// Returns the *sum* of per-row losses and writes the number of rows whose argmax equals the label
// to *correct. If dlogits is not null: dlogits (rows, cols) = (softmax - onehot) * grad_scale
// (grad_scale = 1/batch gives the gradient of the mean loss), rounded once to T.
template <class T>
double softmax_cross_entropy(const ExecContext& ctx, const T* logits, const std::int32_t* labels,
                             std::int64_t rows, std::int64_t cols, NoDeduce<T>* dlogits,
                             float grad_scale, std::int64_t* correct);

// Mean-squared error terms: returns sum over all elements of (pred - target)^2; targets are fp32
// (they come from the data). If dpred is not null: dpred (n) = 2 * (pred - target) * grad_scale.
template <class T>
double squared_error(const ExecContext& ctx, const T* pred, const float* target, std::int64_t n,
                     NoDeduce<T>* dpred, float grad_scale);

// Sum of squares of x (n), accumulated in double (gradient-norm clipping).
template <class T>
double sum_of_squares(const ExecContext& ctx, const T* x, std::int64_t n);

// x (n) *= alpha.
template <class T>
void scale(const ExecContext& ctx, T* x, std::int64_t n, float alpha);

// x (n) = +0.0 (all-zero bits: also over NaN or inf, which `scale` by 0 would keep).
void zero_fill(const ExecContext& ctx, float* x, std::int64_t n);

// dst (n) = src converted: fp32 -> bf16 rounds to nearest even (float_to_bf16), bf16 -> fp32 is
// exact. src and dst must not overlap.
void cast(const ExecContext& ctx, const float* src, Bf16* dst, std::int64_t n);
void cast(const ExecContext& ctx, const Bf16* src, float* dst, std::int64_t n);

// --- Sums that stay where the model runs -------------------------------------------------------
// The variants below never wait for the stream: on CUDA they add into doubles in device memory,
// which the caller reads back once (take_device_sums) instead of once per call. On the CPU the
// same doubles are host memory. Each add is done by one thread in stream order: bitwise
// reproducible run to run.

// The doubles of a loss window: [0] sum of per-call mean losses, [1] rows whose argmax equals the
// label, [2] rows whose label is outside [0, cols) (CUDA; their dlogits rows are left unwritten;
// the CPU throws UserError at once, as softmax_cross_entropy does).
inline constexpr int kLossSumCount = 3;

// As softmax_cross_entropy, but sums[0] += (sum of row losses) / rows and sums[1] += correct rows
// (sums: kLossSumCount doubles on ctx.device). T: the logits' storage (the loss sums in double).
template <class T>
void softmax_cross_entropy_accumulate(const ExecContext& ctx, const T* logits,
                                      const std::int32_t* labels, std::int64_t rows,
                                      std::int64_t cols, NoDeduce<T>* dlogits, float grad_scale,
                                      double* sums);

// As squared_error, but sums[0] += (sum over the n elements) / divisor.
template <class T>
void squared_error_accumulate(const ExecContext& ctx, const T* pred, const float* target,
                              std::int64_t n, NoDeduce<T>* dpred, float grad_scale, double divisor,
                              double* sums);

// host (count) = sums (count doubles on ctx.device), then sums = 0: one read-back, which waits
// for ctx.stream (for at most ctx.host_wait_timeout_s when set, Note [Host read-backs]).
void take_device_sums(const ExecContext& ctx, double* sums, double* host, int count);

// A read-only range of n elements of T (float or Bf16) from data.
template <class T>
struct ReadSpan {
  const T* data = nullptr;
  std::int64_t n = 0;
};
using FloatSpan = ReadSpan<float>;

// Sum over `spans` of each span's sum of squares, in double, added in span order (the global
// gradient norm over many buckets; bf16 spans: the bf16 wire gradients). Returns to the host: on
// CUDA with one read-back for all spans.
template <class T>
double total_sum_of_squares(const ExecContext& ctx, const ReadSpan<T>* spans, std::int64_t count);

}  // namespace zl
