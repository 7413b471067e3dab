// The Tensor-level losses of losses.h: shape and dtype checks, then the kernel of the dtype.
#include "models/losses.h"

#include "base/errors.h"
#include "kernels/elementwise.h"

namespace zl {
namespace {

void check_grad(const Tensor& out, const Tensor& grad, const char* loss) {
  ZL_CHECK(grad.ptr == nullptr || (grad.rows == out.rows && grad.cols == out.cols &&
                                   grad.dtype == out.dtype && grad.device == out.device),
           "{}: gradient ({}, {}) {} for an output ({}, {}) {}", loss, grad.rows, grad.cols,
           dtype_name(grad.dtype), out.rows, out.cols, dtype_name(out.dtype));
}

template <class T>
T* grad_or_null(const Tensor& grad) {
  return grad.ptr == nullptr ? nullptr : grad.as<T>();
}

}  // namespace

double cross_entropy_loss(const ExecContext& ctx, const Tensor& logits, const std::int32_t* labels,
                          const Tensor& dlogits, float grad_scale, std::int64_t* correct) {
  check_grad(logits, dlogits, "cross_entropy_loss");
  if (logits.dtype == DType::BF16) {
    return softmax_cross_entropy(ctx, logits.bf16(), labels, logits.rows, logits.cols,
                                 grad_or_null<Bf16>(dlogits), grad_scale, correct);
  }
  return softmax_cross_entropy(ctx, logits.f32(), labels, logits.rows, logits.cols,
                               grad_or_null<float>(dlogits), grad_scale, correct);
}

double squared_error_loss(const ExecContext& ctx, const Tensor& pred, const float* target,
                          const Tensor& dpred, float grad_scale) {
  check_grad(pred, dpred, "squared_error_loss");
  if (pred.dtype == DType::BF16) {
    return squared_error(ctx, pred.bf16(), target, pred.numel(), grad_or_null<Bf16>(dpred),
                         grad_scale);
  }
  return squared_error(ctx, pred.f32(), target, pred.numel(), grad_or_null<float>(dpred),
                       grad_scale);
}

}  // namespace zl
