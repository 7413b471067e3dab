// StepStats: what a Trainer's steps did between start() and stop(), in one snapshot, for the
// bench: the main thread's phase times (through the Trainer's PhaseObserver), the communicators'
// counters, the optimizer's host time, the streams' timeline and the trace events. The bench
// reads this instead of reaching into the communicators, the optimizer and the tracer itself.
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "base/stream_timeline.h"
#include "runtime/comm/communicator.h"
#include "runtime/train/plan/mode_plan.h"
#include "runtime/train/step/step_observer.h"
#include "runtime/train/run/trainer.h"

namespace zl {

// Wall time of the phases of Trainer::train_step on the main thread, summed over steps. Overlap
// modes: forward includes waits for broadcasts, finish_backward the mode's schedule.
struct PhaseSeconds {
  double forward = 0.0, backward = 0.0, finish_backward = 0.0;
};

struct StepStats {
  PhaseSeconds host;              // main-thread wall time of the phases
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

  // Zeroes every counter, starts the stream timeline and observes the trainer's phases. Call
  // with nothing in flight (after Trainer::synchronize()).
  void start();
  // Stops the timeline and returns the snapshot. Call after Trainer::synchronize(): the
  // timeline's device marks must have been reached.
  StepStats stop();

  void on_phase(StepPhase phase, double seconds) override;

 private:
  Trainer& trainer_;
  PhaseSeconds phases_;
  double timeline_origin_us_ = 0.0;
};

}  // namespace zl
