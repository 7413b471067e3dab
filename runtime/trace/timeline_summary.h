// What a stream timeline (base/stream_timeline.h) says about a run: the busy time of each phase
// and how much communication compute covered, by interval arithmetic over the spans, so every
// figure is a length of a set of time and never negative.
//
// Note [Exposed communication]: compute = the union of forward and backward (minus the compute
// stream's waits inside them: for broadcasts, and in ZeRO stage 2 for a gradient pool buffer) and
// optimizer spans, on any stream (interleaved steps run on the comm stream); comm = the union of
// the collectives' spans on the comm streams. Hidden = |comm ∩ compute|, exposed = |comm \ compute|
// (communication while no compute ran), idle = the window minus |compute ∪ comm| (launch gaps, host
// work, read-backs). A span nested in another of the same stream (the real collective inside the
// simulated link's) is part of it. Collectives whose recorder did not know the bucket get it by
// issue order: the k-th reduction (or broadcast) of the window is bucket k mod buckets, since each
// step issues one per bucket in bucket order on each communicator (all_reduce_f64, the clip norm's,
// has no bucket).
#pragma once

#include <string>
#include <vector>

#include "base/stream_timeline.h"

namespace zl {

struct Interval {
  double begin = 0.0, end = 0.0;
};

// Sorted, disjoint, non-empty intervals covering the points of `intervals`.
std::vector<Interval> interval_union(std::vector<Interval> intervals);
// Both arguments sorted and disjoint (interval_union's output); so is the result.
std::vector<Interval> interval_intersection(const std::vector<Interval>& a,
                                            const std::vector<Interval>& b);
std::vector<Interval> interval_difference(const std::vector<Interval>& a,
                                          const std::vector<Interval>& b);  // a \ b
double total_length(const std::vector<Interval>& disjoint);

// Seconds over the whole window (divide by the steps for per-step figures).
struct TimelineSummary {
  double window_s = 0.0;
  double forward_s = 0.0, backward_s = 0.0, optimizer_s = 0.0;  // busy time of each phase
  double wait_s = 0.0;  // the compute stream waiting: for broadcasts, for stage 2's pool buffers
  double compute_s = 0.0;     // Note [Exposed communication]
  double reduction_s = 0.0;   // union of all-reduce / reduce / reduce-scatter spans
  double broadcast_s = 0.0;   // union of broadcast / all-gather spans
  double comm_s = 0.0;        // union of every collective's span
  double hidden_comm_s = 0.0, exposed_comm_s = 0.0, idle_s = 0.0;
  std::vector<double> bucket_reduction_s, bucket_step_s, bucket_broadcast_s;  // summed per bucket
};

// Spans outside [0, window_s] are clipped to it.
TimelineSummary summarize_timeline(const std::vector<TimelineSpan>& spans, int buckets,
                                   double window_s);

// The collectives of some streams alone (a tier's communicators): the union of their spans, and
// its parts during compute (hidden) and not (exposed), as Note [Exposed communication] counts
// them for all streams. Two such sets may overlap each other: their exposed parts need not add
// up to the whole's.
struct CommCoverage {
  double comm_s = 0.0, hidden_comm_s = 0.0, exposed_comm_s = 0.0;
};
CommCoverage comm_coverage(const std::vector<TimelineSpan>& spans,
                           const std::vector<std::string>& streams, double window_s);

}  // namespace zl
