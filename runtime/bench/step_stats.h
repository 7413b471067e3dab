// StepStats: what a Trainer's steps did between start() and stop(), in one snapshot, for the
// bench: the main thread's time in the mode's schedule (through the Trainer's PhaseObserver), the
// communicators' counters, the streams' timeline and the trace events. The bench reads this
// instead of reaching into the communicators and the tracer itself.
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "base/stream_timeline.h"
#include "runtime/comm/communicator.h"
#include "runtime/train/plan/mode_plan.h"
#include "runtime/train/step/step_observer.h"
#include "runtime/train/run/trainer.h"

namespace zl {

struct StepStats {
  // Main-thread wall time of the mode's schedule after backward (PhaseObserver), summed over
  // steps; forward and backward are the timeline's.
  double finish_backward_s = 0.0;
  // The communicators' counters (replica: hybrid sharding's, zero without it).
  CommStats reduce, broadcast, replica;
  RankMemory allocated;  // Trainer::allocated_memory()
  // Every stream's spans since start(), seconds since then.
  std::vector<TimelineSpan> timeline;
  nlohmann::json trace_events;  // the tracer's events since start() (empty when not tracing)
};

class StepStatsRecorder final : public PhaseObserver {
 public:
  explicit StepStatsRecorder(Trainer& trainer) : trainer_(trainer) {}
  ~StepStatsRecorder() override { trainer_.set_phase_observer(nullptr); }

  // Zeroes every counter, starts the stream timeline and observes the trainer's schedule time.
  // Call with nothing in flight (after Trainer::synchronize()).
  void start();
  // Stops the timeline and returns the snapshot. Call after Trainer::synchronize(): the
  // timeline's device marks must have been reached.
  StepStats stop();

  void on_after_backward(double seconds) override;

 private:
  Trainer& trainer_;
  double finish_backward_s_ = 0.0;
  double timeline_origin_us_ = 0.0;
};

}  // namespace zl
