// LossWindow: this rank's training-loss statistics over a log window (sum of per-micro-batch mean
// losses, correct predictions, samples, steps counted). On CUDA the sums stay on the device and
// take() reads them back once per window, so no micro-batch stalls the host between forward and
// backward, unless the step's check reads the step's loss (step_loss(); docs/design.md,
// "Divergence"); on the CPU they are host doubles, added per step and then per window.
#pragma once

#include <cstdint>

#include "base/device_buffer.h"
#include "base/exec_context.h"
#include "kernels/elementwise.h"
#include "models/tensor.h"

namespace zl {

// Loss statistics summed over micro-batches on this rank.
struct StepLoss {
  double loss_sum = 0.0;  // sum of per-micro-batch mean losses
  double correct = 0.0;
  double samples = 0.0;
  std::int64_t steps = 0;  // steps whose loss is in the sums (a skipped step's is not)
};

// Whether a finished step's loss joins the window (a step skipped as not finite does not).
enum class StepCount { Counted, Skipped };

class LossWindow {
 public:
  explicit LossWindow(ExecContext compute);

  // One micro-batch's loss, and its gradient into dlogits (batch, classes) = (softmax - onehot) /
  // batch, the gradient of the mean loss. logits and dlogits are the model's output and its
  // gradient slot, in the model's dtype (fp32 or bf16; the sums are double either way).
  void add_classification(const Tensor& logits, const std::int32_t* labels,
                          const Tensor& dlogits);
  // The mean squared error over n = batch x outputs elements of pred; dpred (n) = 2 (pred -
  // target) / n. Targets are fp32 (they come from the data).
  void add_regression(const Tensor& pred, const float* target, const Tensor& dpred);
  // This rank's loss of the current step so far (CUDA: one read-back, which also moves the step's
  // sums to the host). A label outside [0, classes) found on CUDA is reported here.
  double step_loss();
  // After a step's last micro-batch.
  void end_step(StepCount count = StepCount::Counted);
  // The window's sums since the last take (one read-back on CUDA), and a fresh window. A label
  // outside [0, classes) found on CUDA is reported here (the CPU reports it at once).
  StepLoss take();

 private:
  double* sums();  // where this micro-batch's sums go: device doubles on CUDA, step_ on the CPU
  // Reads the device sums into `host` (adding) and zeroes them; throws on bad labels.
  void add_device_sums(double* host);

  ExecContext compute_;
  DeviceBuffer device_sums_;  // CUDA: kLossSumCount doubles, zeroed by each take
  double step_[kLossSumCount] = {};  // CPU, or CUDA after step_loss(): this step's sums
  double step_samples_ = 0.0;
  StepLoss window_;  // the host's part: loss and correct (CPU, or read per step), samples, steps
  std::int64_t classes_ = 0;         // for the bad-label message
};

}  // namespace zl
