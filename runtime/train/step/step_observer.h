// Observers of a training step. StepObserver: what a step did to each bucket, in the order it
// happened, for tests that check where steps run relative to collectives. PhaseObserver: the
// main thread's wall time in the mode's schedule after backward, for the bench. Both optional: with
// none the step pays one null test per event and issues nothing extra.
#pragma once

namespace zl {

struct StepEvent {
  // Gather*: ZeRO stage 3's parameter gathers (parameter_gather.h), issued, waited for (complete
  // on the CPU) and released; ParameterRead: a layer is about to read the bucket's parameters.
  enum class Kind {
    CollectiveStarted,
    CollectiveDone,
    StepBegin,
    StepEnd,
    BroadcastStarted,
    GatherIssued,
    GatherDone,
    GatherReleased,
    ParameterRead,
  };
  Kind kind;
  int bucket;
};

class StepObserver {
 public:
  virtual ~StepObserver() = default;
  // Events come from the main thread and from the reduce communicator's thread (interleaved
  // steps), so an observer synchronises itself. CollectiveDone is recorded by a task on the
  // reduce stream after the bucket's collective (an observer therefore adds one then() per
  // bucket); the others where they happen.
  virtual void on_step_event(const StepEvent& event) = 0;
};

class PhaseObserver {
 public:
  virtual ~PhaseObserver() = default;
  // Main thread, once per step: the wall time of the mode's schedule after the final backward
  // (ddp and zero/none wait for the collectives there). Forward and backward are the timeline's.
  virtual void on_after_backward(double seconds) = 0;
};

}  // namespace zl
