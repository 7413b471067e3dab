// StepStatsRecorder: the bench's snapshot of a Trainer's steps (see step_stats.h).
#include "runtime/bench/step_stats.h"

#include "base/tracer.h"

namespace zl {

void StepStatsRecorder::start() {
  const StepComms comms = trainer_.comms();
  comms.reduce.reset_stats();
  comms.broadcast.reset_stats();
  if (comms.replica) comms.replica->reset_stats();
  finish_backward_s_ = 0.0;
  Tracer& tracer = trainer_.tracer();
  tracer.clear();
  tracer.reset_origin();
  tracer.timeline().start(trainer_.compute_context());
  timeline_origin_us_ = tracer.now_us();
  trainer_.set_phase_observer(this);
}

void StepStatsRecorder::on_after_backward(double seconds) { finish_backward_s_ += seconds; }

StepStats StepStatsRecorder::stop() {
  trainer_.set_phase_observer(nullptr);
  Tracer& tracer = trainer_.tracer();
  tracer.timeline().stop();
  StepStats s;
  s.finish_backward_s = finish_backward_s_;
  const StepComms comms = trainer_.comms();
  s.reduce = comms.reduce.stats();
  s.broadcast = comms.broadcast.stats();
  if (comms.replica) s.replica = comms.replica->stats();
  s.allocated = trainer_.allocated_memory();
  s.timeline = tracer.timeline().spans();
  if (tracer.enabled() && trainer_.compute_context().device == DeviceKind::Cuda) {
    // The GPU streams' spans beside the host's: their own threads in the Chrome trace, placed on
    // the tracer's clock through the timeline's origin (aligned to a few us).
    for (const TimelineSpan& t : s.timeline) {
      tracer.span("gpu " + t.stream, t.name, timeline_origin_us_ + t.begin_s * 1e6,
                  timeline_origin_us_ + t.end_s * 1e6,
                  t.bucket >= 0 ? nlohmann::json{{"bucket", t.bucket}, {"clock", "gpu"}}
                                : nlohmann::json{{"clock", "gpu"}});
    }
  }
  if (tracer.enabled()) s.trace_events = tracer.events();
  return s;
}

}  // namespace zl
