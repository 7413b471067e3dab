// Tracer: thread-safe Chrome trace-event collection for one rank (see tracer.h).
#include "base/tracer.h"

namespace zl {

Tracer::Tracer(int rank, bool enabled)
    : rank_(rank), enabled_(enabled), origin_(std::chrono::steady_clock::now()) {}

double Tracer::now_us() const {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - origin_)
      .count();
}

void Tracer::reset_origin() { origin_ = std::chrono::steady_clock::now(); }

int Tracer::thread_id(const std::string& thread) {
  for (std::size_t i = 0; i < threads_.size(); ++i) {
    if (threads_[i] == thread) return static_cast<int>(i);
  }
  threads_.push_back(thread);
  return static_cast<int>(threads_.size() - 1);
}

void Tracer::span(const std::string& thread, const std::string& name, double begin_us,
                  double end_us, nlohmann::json args) {
  if (!enabled_ || begin_us > stop_us_.load()) return;
  std::lock_guard lock(mutex_);
  events_.push_back({{"name", name},
                     {"ph", "X"},
                     {"pid", rank_},
                     {"tid", thread_id(thread)},
                     {"ts", begin_us},
                     {"dur", end_us - begin_us},
                     {"args", std::move(args)}});
}

nlohmann::json Tracer::events() const {
  std::lock_guard lock(mutex_);
  nlohmann::json out = metadata_events();
  for (const auto& e : events_) out.push_back(e);
  return out;
}

nlohmann::json Tracer::take_events() {
  std::lock_guard lock(mutex_);
  nlohmann::json out = metadata_events();
  for (auto& e : events_) out.push_back(std::move(e));
  events_ = nlohmann::json::array();
  return out;
}

nlohmann::json Tracer::metadata_events() const {
  nlohmann::json out = nlohmann::json::array();
  out.push_back({{"name", "process_name"},
                 {"ph", "M"},
                 {"pid", rank_},
                 {"args", {{"name", "rank " + std::to_string(rank_)}}}});
  for (std::size_t i = 0; i < threads_.size(); ++i) {
    out.push_back({{"name", "thread_name"},
                   {"ph", "M"},
                   {"pid", rank_},
                   {"tid", static_cast<int>(i)},
                   {"args", {{"name", threads_[i]}}}});
  }
  return out;
}

void Tracer::clear() {
  std::lock_guard lock(mutex_);
  events_ = nlohmann::json::array();
}

TraceSpan::TraceSpan(Tracer* tracer, std::string thread, std::string name, nlohmann::json args)
    : tracer_(tracer && tracer->enabled() ? tracer : nullptr),
      thread_(std::move(thread)),
      name_(std::move(name)),
      args_(std::move(args)) {
  if (tracer_) begin_us_ = tracer_->now_us();
}

TraceSpan::~TraceSpan() {
  if (tracer_) tracer_->span(thread_, name_, begin_us_, tracer_->now_us(), std::move(args_));
}

}  // namespace zl
