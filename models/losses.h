// The losses on a model's output Tensor: softmax cross-entropy and squared error of
// kernels/elementwise.h, dispatched on the output's dtype (fp32 or bf16). Labels and regression
// targets come from the data and are always int32 / fp32; sums accumulate in double and the
// gradient is written in the output's dtype (rounded once for bf16).
#pragma once

#include <cstdint>

#include "base/exec_context.h"
#include "models/tensor.h"

namespace zl {

// Sum over rows of the cross-entropy of logits (rows, classes) against labels (rows); *correct =
// rows whose first argmax is the label. If dlogits.ptr is not null: dlogits (same shape and dtype)
// = (softmax - onehot) * grad_scale.
double cross_entropy_loss(const ExecContext& ctx, const Tensor& logits, const std::int32_t* labels,
                          const Tensor& dlogits, float grad_scale, std::int64_t* correct);

// Sum over all elements of (pred - target)^2; if dpred.ptr is not null: dpred = 2 * (pred -
// target) * grad_scale.
double squared_error_loss(const ExecContext& ctx, const Tensor& pred, const float* target,
                          const Tensor& dpred, float grad_scale);

}  // namespace zl
