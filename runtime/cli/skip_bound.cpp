// SkipBound (see skip_bound.h).
#include "runtime/cli/skip_bound.h"

#include <string>

#include <fmt/format.h>

#include "runtime/train/step/step_verdict.h"

namespace zl {

void SkipBound::after_step(std::int64_t step, std::int64_t skipped_total) {
  const bool skipped = last_total_ >= 0 ? skipped_total > last_total_ : skipped_total > 0;
  last_total_ = skipped_total;
  in_a_row_ = skipped ? in_a_row_ + 1 : 0;
  if (!skipped) changed_ = true;
  if (in_a_row_ < max_) return;
  const std::string steps = in_a_row_ == 1
                                ? fmt::format("step {} was skipped", step)
                                : fmt::format("steps {} to {} were all skipped",
                                              step - in_a_row_ + 1, step);
  throw NonfiniteStop(fmt::format(
      "{} as non-finite (train.on_nonfinite = \"skip_step\"), train.max_consecutive_skips = {} "
      "in a row: the run is not training, and it ends here as \"stop\" does, with no checkpoint "
      "of {} (lower optimizer.lr, set train.clip_grad_norm, or resume from an earlier "
      "checkpoint)",
      steps, max_, in_a_row_ == 1 ? "it" : "these steps"));
}

}  // namespace zl
