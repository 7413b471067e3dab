// StepObserver: what a training step did to each bucket, in the order it happened, for tests that
// check where steps run relative to collectives. Optional: with no observer the step pays one
// null test per event and issues nothing extra. Events come from the main thread and from the
// reduce communicator's thread (interleaved steps), so an observer synchronises itself.
#pragma once

namespace zl {

struct StepEvent {
  enum class Kind { CollectiveLaunched, CollectiveDone, StepBegin, StepEnd, BroadcastLaunched };
  Kind kind;
  int bucket;
};

class StepObserver {
 public:
  virtual ~StepObserver() = default;
  // CollectiveDone is recorded by a task on the reduce stream after the bucket's collective (an
  // observer therefore adds one then() per bucket); the others where they happen.
  virtual void on_step_event(const StepEvent& event) = 0;
};

}  // namespace zl
