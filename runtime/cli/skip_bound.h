// The bound on consecutive skipped steps (train.max_consecutive_skips; docs/design.md,
// "Divergence"): under on_nonfinite = "skip_step" a run whose steps are all non-finite would
// otherwise skip to its end and exit 0 with nothing learnt.
#pragma once

#include <cstdint>

namespace zl {

class SkipBound {
 public:
  explicit SkipBound(std::int64_t max_consecutive) : max_(max_consecutive) {}
  // After each step, with the run's total of skipped steps so far (every rank sees the same: the
  // skip is decided together). Throws NonfiniteStop on every rank when the last max_consecutive
  // steps were all skipped, before anything (a checkpoint) is made of them.
  void after_step(std::int64_t step, std::int64_t skipped_total);

  // Whether a step since the last checkpoint (or since the start) changed the parameters. When
  // every step since was skipped, a checkpoint would hold the same state under a later step and
  // only rotate an older one out (checkpoint.keep), so the caller writes none, except at the last
  // step (a rerun with checkpoint.resume = true must find the run finished).
  bool state_changed_since_checkpoint() const { return changed_; }
  void checkpoint_written() { changed_ = false; }

 private:
  std::int64_t max_;
  std::int64_t last_total_ = -1;  // skipped_total after the previous step (-1: none yet)
  std::int64_t in_a_row_ = 0;
  bool changed_ = true;  // the start state may be in no checkpoint yet
};

}  // namespace zl
