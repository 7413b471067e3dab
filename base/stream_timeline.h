// StreamTimeline: spans of what each stream did, on one clock, timed where the work runs. A mark on
// a CUDA stream is an event recorded there (its time is when the GPU reaches it, not when the host
// enqueued it); a mark on the CPU is the host clock of the calling thread, which on the CPU *is*
// the stream. The bench starts it around its timed steps and reads the spans back once every
// stream is idle; the arithmetic over them is runtime/trace/timeline_summary.h. Off by default:
// mark() then costs one atomic load. Thread-safe (CPU comm threads mark too).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "base/exec_context.h"

namespace zl {

struct TimelineSpan {
  std::string stream;  // "compute", "comm.reduce", "comm.broadcast"
  std::string name;    // "forward", "backward", "wait", "optimizer", "all_reduce", "reduce", ...
  int bucket = -1;     // -1 where the recorder does not know it
  double begin_s = 0.0, end_s = 0.0;  // since start()
};

class StreamTimeline {
 public:
  StreamTimeline() = default;
  ~StreamTimeline();
  StreamTimeline(const StreamTimeline&) = delete;
  StreamTimeline& operator=(const StreamTimeline&) = delete;

  // Clears and starts recording; the origin is now on `exec` (CUDA: waits for exec's stream,
  // then records the origin event, so device and host marks share a clock to within a few us).
  void start(const ExecContext& exec);
  // Stops recording (spans recorded so far stay readable).
  void stop() { recording_ = false; }
  bool recording() const { return recording_.load(std::memory_order_relaxed); }

  struct Mark {
    int index = -1;  // -1: not recording
    bool device = false;
  };
  // A point on `exec`'s stream (see above).
  Mark mark(const ExecContext& exec);
  // A span between two marks of one stream; ignored when either mark is invalid.
  void span(std::string stream, std::string name, int bucket, Mark begin, Mark end);

  // The spans, in seconds since start(). Every CUDA stream marked must have reached its marks
  // (synchronize first): reading an unfinished event is an InternalError.
  std::vector<TimelineSpan> spans() const;

 private:
  struct Pending {
    std::string stream, name;
    int bucket;
    Mark begin, end;
  };
  double seconds_of(const Mark& m) const;  // mutex_ held

  std::atomic<bool> recording_{false};
  mutable std::mutex mutex_;
  std::chrono::steady_clock::time_point host_origin_{};
  void* origin_event_ = nullptr;   // cudaEvent_t
  std::vector<void*> events_;      // cudaEvent_t pool; the first device_marks_ are in use
  int device_marks_ = 0;
  std::vector<double> host_marks_;  // seconds since host_origin_
  std::vector<Pending> pending_;
};

// Records [begin, end) of a span on `exec`'s stream when `timeline` is recording (RAII).
class TimelineScope {
 public:
  TimelineScope(StreamTimeline* timeline, const ExecContext& exec, std::string stream,
                std::string name, int bucket = -1);
  ~TimelineScope();
  TimelineScope(const TimelineScope&) = delete;
  TimelineScope& operator=(const TimelineScope&) = delete;

 private:
  StreamTimeline* timeline_;
  ExecContext exec_;
  std::string stream_, name_;
  int bucket_;
  StreamTimeline::Mark begin_;
};

}  // namespace zl
