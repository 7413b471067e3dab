// The per-window divergence check (see divergence_window.h).
#include "runtime/train/run/divergence_window.h"

#include <cmath>
#include <string>

#include <fmt/format.h>

#include "kernels/elementwise.h"

namespace zl {

double window_check_value(const ParameterStore& store, const ExecContext& compute) {
  return store.param_dtype() == DType::BF16
             ? sum_of_squares(compute, store.params_as<Bf16>(), store.total_numel())
             : sum_of_squares(compute, store.params_as<float>(), store.total_numel());
}

void check_window(StepCheck check, double loss_sum, double check_value, std::int64_t first_step,
                  std::int64_t last_step) {
  if (check == StepCheck::EveryStep) return;  // every step was checked already
  const bool loss_bad = !std::isfinite(loss_sum);
  if (!loss_bad && std::isfinite(check_value)) return;
  // A window of one step (train.log_every = 1) names it as the per-step check does.
  const std::string where =
      first_step == last_step
          ? fmt::format("diverged at step {} (checked once per log window on CUDA)", last_step)
          : fmt::format("diverged between steps {} and {} (checked once per log window on CUDA; "
                        "train.log_every = 1 names the step)",
                        first_step, last_step);
  throw NonfiniteStop(fmt::format(
      "{}: {}; train.on_nonfinite = \"stop\" ends the run here, and no checkpoint of these steps "
      "is written (lower optimizer.lr, or set train.clip_grad_norm)",
      where,
      loss_bad ? "the training loss is not finite (summed over ranks)"
               : "the parameters are not finite"));
}

}  // namespace zl
