// StreamTimeline: host-clock and CUDA-event marks resolved into spans (see stream_timeline.h).
#include "base/stream_timeline.h"

#include "base/clock.h"
#include "base/errors.h"

#if defined(ZEROLAP_WITH_CUDA)
#include <cuda_runtime.h>

#include "base/cuda_check.h"
#endif

namespace zl {

StreamTimeline::~StreamTimeline() {
#if defined(ZEROLAP_WITH_CUDA)
  for (void* e : events_) cudaEventDestroy(static_cast<cudaEvent_t>(e));
  if (origin_event_ != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(origin_event_));
#endif
}

void StreamTimeline::start(const ExecContext& exec) {
  std::lock_guard lock(mutex_);
  pending_.clear();
  host_marks_.clear();
  device_marks_ = 0;
  if (exec.device == DeviceKind::Cuda) {
#if defined(ZEROLAP_WITH_CUDA)
    auto stream = static_cast<cudaStream_t>(exec.stream);
    if (origin_event_ == nullptr) {
      cudaEvent_t e = nullptr;
      ZL_CUDA_CHECK(cudaEventCreate(&e));
      origin_event_ = e;
    }
    ZL_CUDA_CHECK(cudaStreamSynchronize(stream));
    ZL_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(origin_event_), stream));
    ZL_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(origin_event_)));
#else
    throw InternalError("StreamTimeline: a CUDA context in a build without CUDA");
#endif
  }
  host_origin_ = Clock::now();
  recording_ = true;
}

StreamTimeline::Mark StreamTimeline::mark(const ExecContext& exec) {
  if (!recording()) return {};
  std::lock_guard lock(mutex_);
  if (exec.device == DeviceKind::Cuda) {
#if defined(ZEROLAP_WITH_CUDA)
    if (device_marks_ == static_cast<int>(events_.size())) {
      cudaEvent_t e = nullptr;
      ZL_CUDA_CHECK(cudaEventCreate(&e));
      events_.push_back(e);
    }
    ZL_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(events_[static_cast<std::size_t>(device_marks_)]),
                                  static_cast<cudaStream_t>(exec.stream)));
    return {device_marks_++, true};
#else
    throw InternalError("StreamTimeline: a CUDA context in a build without CUDA");
#endif
  }
  host_marks_.push_back(seconds_since(host_origin_));
  return {static_cast<int>(host_marks_.size()) - 1, false};
}

void StreamTimeline::span(std::string stream, std::string name, int bucket, Mark begin, Mark end) {
  if (begin.index < 0 || end.index < 0) return;
  std::lock_guard lock(mutex_);
  pending_.push_back({std::move(stream), std::move(name), bucket, begin, end});
}

double StreamTimeline::seconds_of(const Mark& m) const {
  if (!m.device) return host_marks_[static_cast<std::size_t>(m.index)];
#if defined(ZEROLAP_WITH_CUDA)
  float ms = 0.0f;
  const cudaError_t e =
      cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(origin_event_),
                           static_cast<cudaEvent_t>(events_[static_cast<std::size_t>(m.index)]));
  ZL_CHECK(e != cudaErrorNotReady, "StreamTimeline::spans: a stream has not reached its mark yet");
  ZL_CUDA_CHECK(e);
  return static_cast<double>(ms) * 1e-3;
#else
  throw InternalError("StreamTimeline: a device mark in a build without CUDA");
#endif
}

std::vector<TimelineSpan> StreamTimeline::spans() const {
  std::lock_guard lock(mutex_);
  std::vector<TimelineSpan> out;
  out.reserve(pending_.size());
  for (const Pending& p : pending_) {
    out.push_back({p.stream, p.name, p.bucket, seconds_of(p.begin), seconds_of(p.end)});
  }
  return out;
}

TimelineScope::TimelineScope(StreamTimeline* timeline, const ExecContext& exec, std::string stream,
                             std::string name, int bucket)
    : timeline_(timeline && timeline->recording() ? timeline : nullptr),
      exec_(exec),
      stream_(std::move(stream)),
      name_(std::move(name)),
      bucket_(bucket) {
  if (timeline_) begin_ = timeline_->mark(exec_);
}

TimelineScope::~TimelineScope() {
  if (!timeline_) return;
  try {
    timeline_->span(std::move(stream_), std::move(name_), bucket_, begin_, timeline_->mark(exec_));
  } catch (...) {
    // A destructor must not throw; a failing CUDA call shows up at the next checked call.
  }
}

}  // namespace zl
