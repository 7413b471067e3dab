// Chrome trace-event recording (opens in Perfetto / chrome://tracing): one process per rank, one
// thread per stream ("main", "comm.reduce", "comm.broadcast", ...). Spans are recorded with a
// monotonic clock relative to a per-run origin; recording is thread-safe and a no-op when disabled.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/stream_timeline.h"

namespace zl {

// The trace thread of the training (main) thread: forward, backward, layers, checkpoints, and an
// optimizer step run on the compute stream. Comm streams name their threads after themselves.
inline constexpr const char* kMainTraceThread = "main";

class Tracer {
 public:
  Tracer(int rank, bool enabled);

  bool enabled() const { return enabled_; }
  int rank() const { return rank_; }
  // Microseconds since this tracer was created (or since reset_origin()).
  double now_us() const;
  void reset_origin();

  // A complete span ("ph": "X") on thread `thread`.
  void span(const std::string& thread, const std::string& name, double begin_us, double end_us,
            nlohmann::json args = nlohmann::json::object());

  // From now on, spans that begin after `at_us` (now_us()'s clock) are not recorded; those begun
  // before still are when they end later (an overlap mode's collectives of the last traced step).
  // A long run's trace stays bounded (output.trace_steps).
  void stop_recording_at(double at_us) { stop_us_.store(at_us); }

  // This rank's events as a JSON array (thread-name metadata included).
  nlohmann::json events() const;
  // As events(), moved out: the tracer holds none afterwards (a long trace is not copied).
  nlohmann::json take_events();
  void clear();

  // The streams' own timeline (base/stream_timeline.h): everything that records spans for the
  // Chrome trace also marks it, so it travels with the tracer. Independent of enabled(): the
  // bench starts it whether or not output.trace is set.
  StreamTimeline& timeline() { return timeline_; }

 private:
  int thread_id(const std::string& thread);  // caller holds mutex_
  nlohmann::json metadata_events() const;     // caller holds mutex_

  int rank_;
  bool enabled_;
  std::chrono::steady_clock::time_point origin_;
  mutable std::mutex mutex_;
  std::vector<std::string> threads_;
  nlohmann::json events_ = nlohmann::json::array();
  std::atomic<double> stop_us_{std::numeric_limits<double>::infinity()};
  StreamTimeline timeline_;
};

// RAII span: records [construction, destruction) when the tracer is enabled.
class TraceSpan {
 public:
  TraceSpan(Tracer* tracer, std::string thread, std::string name,
            nlohmann::json args = nlohmann::json::object());
  ~TraceSpan();
  TraceSpan(const TraceSpan&) = delete;
  TraceSpan& operator=(const TraceSpan&) = delete;

 private:
  Tracer* tracer_;
  std::string thread_, name_;
  nlohmann::json args_;
  double begin_us_ = 0.0;
};

}  // namespace zl
