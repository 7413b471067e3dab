// The bound on consecutive skipped steps and whether a checkpoint is due a new state
// (skip_bound.h).
#include <catch2/catch.hpp>

#include "runtime/cli/skip_bound.h"
#include "runtime/train/step/step_verdict.h"

using Catch::Matchers::Contains;

TEST_CASE("max_consecutive_skips skipped steps in a row end the run, naming them", "[skip]") {
  zl::SkipBound bound(3);
  bound.after_step(1, 0);
  bound.after_step(2, 1);  // skipped
  bound.after_step(3, 1);  // trained: the count starts again
  bound.after_step(4, 2);
  bound.after_step(5, 3);
  CHECK_THROWS_WITH(bound.after_step(6, 4),
                    Contains("steps 4 to 6 were all skipped") &&
                        Contains("train.max_consecutive_skips = 3 in a row"));
}

TEST_CASE("a bound of one names the one step skipped", "[skip]") {
  zl::SkipBound bound(1);
  bound.after_step(10, 0);
  CHECK_THROWS_AS(bound.after_step(11, 1), zl::NonfiniteStop);
  zl::SkipBound again(1);
  CHECK_THROWS_WITH(again.after_step(11, 1),
                    Contains("step 11 was skipped") && !Contains("steps 11 to 11"));
}

TEST_CASE("a checkpoint of only skipped steps holds no new state", "[skip]") {
  zl::SkipBound bound(10);
  CHECK(bound.state_changed_since_checkpoint());  // the start state may be in no checkpoint
  bound.checkpoint_written();
  bound.after_step(1, 1);  // skipped
  CHECK_FALSE(bound.state_changed_since_checkpoint());
  bound.after_step(2, 1);  // trained
  CHECK(bound.state_changed_since_checkpoint());
}
