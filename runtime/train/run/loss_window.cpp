// LossWindow: loss sums on the device, read back once per log window (see loss_window.h).
#include "runtime/train/run/loss_window.h"

#include <fmt/format.h>

#include "base/errors.h"

namespace zl {
namespace {

// kLossSumCount doubles in a float buffer (cudaMalloc aligns to 256 bytes).
static_assert(sizeof(double) == 2 * sizeof(float));
constexpr std::int64_t kSumFloats = 2 * kLossSumCount;

}  // namespace

LossWindow::LossWindow(ExecContext compute) : compute_(compute) {
  if (compute_.device == DeviceKind::Cuda) device_sums_ = DeviceBuffer(compute_.device, kSumFloats);
}

void LossWindow::add_classification(const Tensor& logits, const std::int32_t* labels,
                                    const Tensor& dlogits) {
  ZL_CHECK(logits.dtype == dlogits.dtype && logits.numel() == dlogits.numel(),
           "loss gradient slot ({}, {}) {} for logits ({}, {}) {}", dlogits.rows, dlogits.cols,
           dtype_name(dlogits.dtype), logits.rows, logits.cols, dtype_name(logits.dtype));
  const std::int64_t batch = logits.rows;
  classes_ = logits.cols;
  double* sums = this->sums();
  const float grad_scale = 1.0f / static_cast<float>(batch);
  if (logits.dtype == DType::BF16) {
    softmax_cross_entropy_accumulate(compute_, logits.bf16(), labels, batch, logits.cols,
                                     dlogits.bf16(), grad_scale, sums);
  } else {
    softmax_cross_entropy_accumulate(compute_, logits.f32(), labels, batch, logits.cols,
                                     dlogits.f32(), grad_scale, sums);
  }
  step_samples_ += static_cast<double>(batch);
}

void LossWindow::add_regression(const Tensor& pred, const float* target, const Tensor& dpred) {
  ZL_CHECK(pred.dtype == dpred.dtype && pred.numel() == dpred.numel(),
           "loss gradient slot ({}, {}) {} for predictions ({}, {}) {}", dpred.rows, dpred.cols,
           dtype_name(dpred.dtype), pred.rows, pred.cols, dtype_name(pred.dtype));
  const std::int64_t n = pred.numel();
  double* sums = this->sums();
  const float grad_scale = 1.0f / static_cast<float>(n);
  if (pred.dtype == DType::BF16) {
    squared_error_accumulate(compute_, pred.bf16(), target, n, dpred.bf16(), grad_scale,
                             static_cast<double>(n), sums);
  } else {
    squared_error_accumulate(compute_, pred.f32(), target, n, dpred.f32(), grad_scale,
                             static_cast<double>(n), sums);
  }
  step_samples_ += static_cast<double>(pred.rows);
}

double* LossWindow::sums() {
  return compute_.device == DeviceKind::Cuda ? reinterpret_cast<double*>(device_sums_.data())
                                             : step_;
}

void LossWindow::add_device_sums(double* host) {
  double sums[kLossSumCount] = {};
  take_device_sums(compute_, reinterpret_cast<double*>(device_sums_.data()), sums, kLossSumCount);
  if (sums[2] > 0.0) {
    throw UserError(fmt::format(
        "softmax_cross_entropy: {} training labels since the last log step are outside [0, {}); "
        "the data's labels do not match the model's number of classes (its last width)",
        sums[2], classes_));
  }
  for (int i = 0; i < kLossSumCount; ++i) host[i] += sums[i];
}

double LossWindow::step_loss() {
  if (compute_.device == DeviceKind::Cuda) add_device_sums(step_);
  return step_[0];
}

void LossWindow::end_step(StepCount count) {
  // On CUDA without step_loss() the step's sums are still on the device: they join the window
  // there (a step is skipped only after step_loss() read them).
  if (count == StepCount::Counted) {
    window_.loss_sum += step_[0];
    window_.correct += step_[1];
    window_.samples += step_samples_;
    ++window_.steps;
  }
  for (double& s : step_) s = 0.0;
  step_samples_ = 0.0;
}

StepLoss LossWindow::take() {
  StepLoss out = window_;
  window_ = StepLoss{};
  if (compute_.device == DeviceKind::Cuda) {
    double sums[kLossSumCount] = {out.loss_sum, out.correct, 0.0};
    add_device_sums(sums);
    out.loss_sum = sums[0];
    out.correct = sums[1];
  }
  return out;
}

}  // namespace zl
