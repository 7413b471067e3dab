// steps_left_in_epochs (runtime/train/run/training_state.h): the length of a train.epochs run from
// a resumed sampler position, against the trainer's own walk of the cursor.
#include <catch2/catch.hpp>

#include <cstdint>

#include "runtime/train/run/training_state.h"

using zl::steps_left_in_epochs;

namespace {

// The cursor after one step, as Trainer::train_step moves it: grad_accum micro-batches taken, and
// fewer than grad_accum left in the epoch skipped before and after.
std::int64_t after_step(std::int64_t cursor, std::int64_t per_epoch, std::int64_t grad_accum) {
  const auto skip_tail = [&] {
    const std::int64_t left = per_epoch - cursor % per_epoch;
    if (left < grad_accum) cursor += left;
  };
  skip_tail();
  cursor += grad_accum;
  skip_tail();
  return cursor;
}

}  // namespace

TEST_CASE("steps_left_in_epochs ends a run where the trainer's walk makes its passes", "[trainer]") {
  for (std::int64_t per_epoch = 1; per_epoch <= 13; ++per_epoch) {
    for (std::int64_t grad_accum = 1; grad_accum <= per_epoch; ++grad_accum) {
      for (std::int64_t epochs = 1; epochs <= 3; ++epochs) {
        // Resumed at the same global batch: every step of the run gives epochs x steps per epoch.
        const std::int64_t total = epochs * (per_epoch / grad_accum);
        std::int64_t cursor = 0;
        for (std::int64_t step = 0; step <= total; ++step) {
          INFO("per_epoch " << per_epoch << ", grad_accum " << grad_accum << ", epochs " << epochs
                            << ", step " << step);
          CHECK(step + steps_left_in_epochs(cursor, per_epoch, grad_accum, epochs) == total);
          cursor = after_step(cursor, per_epoch, grad_accum);
        }
      }
    }
  }
  // From another global batch's position: the rest of this epoch, then whole ones; none past.
  CHECK(steps_left_in_epochs(7, 31, 1, 2) == 55);
  CHECK(steps_left_in_epochs(15, 46, 1, 2) == 77);
  CHECK(steps_left_in_epochs(15, 46, 4, 2) == 7 + 11);
  CHECK(steps_left_in_epochs(92, 46, 1, 2) == 0);
  CHECK(steps_left_in_epochs(100, 46, 1, 2) == 0);
}
