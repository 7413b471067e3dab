// Element-wise and row-wise kernels of the MLP layers and losses. Every function dispatches on
// ctx.device. Matrices are row-major (rows, cols) and contiguous. "=" overwrites, "+=" accumulates.
#pragma once

#include <cstdint>

#include "base/exec_context.h"

namespace zl {

enum class Activation { Identity, Relu, Gelu, Tanh };  // Gelu: the tanh approximation

// y (rows, cols) = act(x + bias[cols]); x and y may alias. `bias` may be null (no bias).
void bias_activation_forward(const ExecContext& ctx, Activation act, const float* x,
                             const float* bias, float* y, std::int64_t rows, std::int64_t cols);

// dx (n) = dy * act'(pre) where pre is the pre-activation input (x + bias); dx may alias dy.
void activation_backward(const ExecContext& ctx, Activation act, const float* pre,
                         const float* dy, float* dx, std::int64_t n);

// dbias (cols) =/+= column sums of dy (rows, cols).
void bias_backward(const ExecContext& ctx, const float* dy, float* dbias, std::int64_t rows,
                   std::int64_t cols, Accumulate acc);

// out (n) = a + b (residual add); out may alias a or b.
void add(const ExecContext& ctx, const float* a, const float* b, float* out, std::int64_t n);

// out (n) =/+= a (gradient fan-in of a residual branch).
void accumulate(const ExecContext& ctx, const float* a, float* out, std::int64_t n, Accumulate acc);

// LayerNorm over the last dimension: y = (x - mean) * rstd * gamma + beta.
// Saves mean (rows) and rstd (rows) for the backward.
void layernorm_forward(const ExecContext& ctx, const float* x, const float* gamma,
                       const float* beta, float* y, float* mean, float* rstd, std::int64_t rows,
                       std::int64_t cols, float eps);

// dx (rows, cols) = ; dgamma, dbeta (cols) =/+= according to `acc`.
void layernorm_backward(const ExecContext& ctx, const float* x, const float* gamma,
                        const float* mean, const float* rstd, const float* dy, float* dx,
                        float* dgamma, float* dbeta, std::int64_t rows, std::int64_t cols,
                        Accumulate acc);

// The three reductions below return a value to the host, so on CUDA they wait for ctx.stream,
// for at most ctx.host_wait_timeout_s when it is set (Note [Host read-backs] in
// elementwise_reductions.cu).

// Softmax cross-entropy over logits (rows, cols) with integer labels (rows).
// Returns the *sum* of per-row losses and writes the number of rows whose argmax equals the label
// to *correct. If dlogits is not null: dlogits (rows, cols) = (softmax - onehot) * grad_scale
// (grad_scale = 1/batch gives the gradient of the mean loss).
double softmax_cross_entropy(const ExecContext& ctx, const float* logits, const std::int32_t* labels,
                             std::int64_t rows, std::int64_t cols, float* dlogits, float grad_scale,
                             std::int64_t* correct);

// Mean-squared error terms: returns sum over all elements of (pred - target)^2.
// If dpred is not null: dpred (n) = 2 * (pred - target) * grad_scale.
double squared_error(const ExecContext& ctx, const float* pred, const float* target,
                     std::int64_t n, float* dpred, float grad_scale);

// Sum of squares of x (n), accumulated in double (gradient-norm clipping).
double sum_of_squares(const ExecContext& ctx, const float* x, std::int64_t n);

// x (n) *= alpha.
void scale(const ExecContext& ctx, float* x, std::int64_t n, float alpha);

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
// (sums: kLossSumCount doubles on ctx.device).
void softmax_cross_entropy_accumulate(const ExecContext& ctx, const float* logits,
                                      const std::int32_t* labels, std::int64_t rows,
                                      std::int64_t cols, float* dlogits, float grad_scale,
                                      double* sums);

// As squared_error, but sums[0] += (sum over the n elements) / divisor.
void squared_error_accumulate(const ExecContext& ctx, const float* pred, const float* target,
                              std::int64_t n, float* dpred, float grad_scale, double divisor,
                              double* sums);

// host (count) = sums (count doubles on ctx.device), then sums = 0: one read-back, which waits
// for ctx.stream (for at most ctx.host_wait_timeout_s when set, Note [Host read-backs]).
void take_device_sums(const ExecContext& ctx, double* sums, double* host, int count);

// A read-only float range (n elements from data).
struct FloatSpan {
  const float* data = nullptr;
  std::int64_t n = 0;
};

// Sum over `spans` of each span's sum of squares, in double, added in span order (the global
// gradient norm over many buckets). Returns to the host: on CUDA with one read-back for all spans.
double total_sum_of_squares(const ExecContext& ctx, const FloatSpan* spans,
                            std::int64_t count);

}  // namespace zl
