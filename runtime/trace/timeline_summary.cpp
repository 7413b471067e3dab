// Interval arithmetic over a stream timeline (timeline_summary.h, Note [Exposed communication]).
#include "runtime/trace/timeline_summary.h"

#include <algorithm>
#include <initializer_list>
#include <map>
#include <string>

namespace zl {

std::vector<Interval> interval_union(std::vector<Interval> intervals) {
  std::sort(intervals.begin(), intervals.end(),
            [](const Interval& a, const Interval& b) { return a.begin < b.begin; });
  std::vector<Interval> out;
  for (const Interval& i : intervals) {
    if (!(i.end > i.begin)) continue;
    if (!out.empty() && i.begin <= out.back().end) {
      out.back().end = std::max(out.back().end, i.end);
    } else {
      out.push_back(i);
    }
  }
  return out;
}

std::vector<Interval> interval_intersection(const std::vector<Interval>& a,
                                            const std::vector<Interval>& b) {
  std::vector<Interval> out;
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const double lo = std::max(a[i].begin, b[j].begin), hi = std::min(a[i].end, b[j].end);
    if (hi > lo) out.push_back({lo, hi});
    if (a[i].end < b[j].end) ++i; else ++j;
  }
  return out;
}

std::vector<Interval> interval_difference(const std::vector<Interval>& a,
                                          const std::vector<Interval>& b) {
  std::vector<Interval> out;
  std::size_t j = 0;
  for (const Interval& x : a) {
    double from = x.begin;
    while (j < b.size() && b[j].end <= from) ++j;
    for (std::size_t k = j; k < b.size() && b[k].begin < x.end; ++k) {
      if (b[k].begin > from) out.push_back({from, b[k].begin});
      from = std::max(from, b[k].end);
    }
    if (x.end > from) out.push_back({from, x.end});
  }
  return out;
}

double total_length(const std::vector<Interval>& disjoint) {
  double sum = 0.0;
  for (const Interval& i : disjoint) sum += i.end - i.begin;
  return sum;
}

namespace {

// The collectives that distribute stepped parameters (broadcast, all-gather).
bool is_parameter_collective(const std::string& name) {
  return name == "broadcast" || name == "all_gather";
}
// Every collective: those, the gradients' and the gradient norm's.
bool is_collective(const std::string& name) {
  return is_parameter_collective(name) || name == "all_reduce" || name == "reduce" ||
         name == "reduce_scatter" || name == "all_reduce_f64";
}

// Per stream, in begin order, the collective spans not nested in an earlier one of that stream.
std::vector<TimelineSpan> outermost_collectives(const std::vector<TimelineSpan>& spans) {
  std::map<std::string, std::vector<TimelineSpan>> by_stream;
  for (const TimelineSpan& s : spans) {
    if (is_collective(s.name)) by_stream[s.stream].push_back(s);
  }
  std::vector<TimelineSpan> out;
  for (auto& [stream, list] : by_stream) {
    std::stable_sort(list.begin(), list.end(), [](const TimelineSpan& a, const TimelineSpan& b) {
      return a.begin_s < b.begin_s || (a.begin_s == b.begin_s && a.end_s > b.end_s);
    });
    double covered_until = -1e300;
    for (const TimelineSpan& s : list) {
      if (s.end_s <= covered_until) continue;  // inside the previous outer span
      out.push_back(s);
      covered_until = s.end_s;
    }
  }
  return out;
}

// The union of the points of several sets of intervals.
std::vector<Interval> union_of(std::initializer_list<std::vector<Interval>> sets) {
  std::vector<Interval> all;
  for (const std::vector<Interval>& set : sets) all.insert(all.end(), set.begin(), set.end());
  return interval_union(std::move(all));
}

Interval clipped(const TimelineSpan& s, double window_s) {
  return Interval{std::clamp(s.begin_s, 0.0, window_s), std::clamp(s.end_s, 0.0, window_s)};
}

// The compute of a window: forward and backward without the compute stream's waits, optimizer.
struct ComputeBusy {
  std::vector<Interval> waits, forward, backward, optimizer, compute;
};
ComputeBusy compute_busy(const std::vector<TimelineSpan>& spans, double window_s) {
  std::vector<Interval> forward, backward, optimizer, wait;
  for (const TimelineSpan& s : spans) {
    const Interval i = clipped(s, window_s);
    if (s.name == "forward") forward.push_back(i);
    if (s.name == "backward") backward.push_back(i);
    if (s.name == "wait") wait.push_back(i);
    if (s.name == "optimizer") optimizer.push_back(i);
  }
  ComputeBusy b;
  b.waits = interval_union(wait);
  b.forward = interval_difference(interval_union(forward), b.waits);
  // ZeRO stage 2's backward waits for a pool buffer (Note [Gradient pool]) the same way.
  b.backward = interval_difference(interval_union(backward), b.waits);
  b.optimizer = interval_union(optimizer);
  b.compute = union_of({b.forward, b.backward, b.optimizer});
  return b;
}

}  // namespace

CommCoverage comm_coverage(const std::vector<TimelineSpan>& spans,
                           const std::vector<std::string>& streams, double window_s) {
  std::vector<Interval> comm;
  for (const TimelineSpan& s : outermost_collectives(spans)) {
    if (std::find(streams.begin(), streams.end(), s.stream) != streams.end()) {
      comm.push_back(clipped(s, window_s));
    }
  }
  const std::vector<Interval> compute = compute_busy(spans, window_s).compute;
  const std::vector<Interval> comm_union = interval_union(comm);
  CommCoverage out;
  out.comm_s = total_length(comm_union);
  out.hidden_comm_s = total_length(interval_intersection(comm_union, compute));
  out.exposed_comm_s = total_length(interval_difference(comm_union, compute));
  return out;
}

TimelineSummary summarize_timeline(const std::vector<TimelineSpan>& spans, int buckets,
                                   double window_s) {
  TimelineSummary out;
  out.window_s = window_s;
  const auto n = static_cast<std::size_t>(std::max(buckets, 0));
  out.bucket_reduction_s.assign(n, 0.0);
  out.bucket_step_s.assign(n, 0.0);
  out.bucket_broadcast_s.assign(n, 0.0);

  for (const TimelineSpan& s : spans) {
    if (s.name == "optimizer" && s.bucket >= 0 && static_cast<std::size_t>(s.bucket) < n) {
      const Interval i = clipped(s, window_s);
      out.bucket_step_s[static_cast<std::size_t>(s.bucket)] += i.end - i.begin;
    }
  }
  std::vector<Interval> reductions, broadcasts;
  std::map<std::string, int> issued;  // per stream: reductions / broadcasts seen so far
  for (const TimelineSpan& s : outermost_collectives(spans)) {
    const Interval i = clipped(s, window_s);
    const bool broadcast = is_parameter_collective(s.name);
    (broadcast ? broadcasts : reductions).push_back(i);
    if (s.name == "all_reduce_f64" || n == 0) continue;
    const int order = issued[s.stream]++;
    const auto b = static_cast<std::size_t>(s.bucket >= 0 ? s.bucket : order % buckets);
    if (b >= n) continue;
    (broadcast ? out.bucket_broadcast_s : out.bucket_reduction_s)[b] += i.end - i.begin;
  }

  const ComputeBusy busy = compute_busy(spans, window_s);
  const auto& compute = busy.compute;
  const auto reduction_union = interval_union(reductions);
  const auto broadcast_union = interval_union(broadcasts);
  const auto comm = union_of({reduction_union, broadcast_union});

  out.forward_s = total_length(busy.forward);
  out.backward_s = total_length(busy.backward);
  out.optimizer_s = total_length(busy.optimizer);
  out.wait_s = total_length(busy.waits);
  out.compute_s = total_length(compute);
  out.reduction_s = total_length(reduction_union);
  out.broadcast_s = total_length(broadcast_union);
  out.comm_s = total_length(comm);
  out.hidden_comm_s = total_length(interval_intersection(comm, compute));
  out.exposed_comm_s = total_length(interval_difference(comm, compute));
  out.idle_s = std::max(0.0, window_s - total_length(union_of({compute, comm})));
  return out;
}

}  // namespace zl
