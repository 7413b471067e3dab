// The timeline arithmetic of the bench (runtime/trace/timeline_summary.h): interval union,
// intersection and difference, and a step's phases, hidden and exposed communication against a
// hand computation.
#include <catch2/catch.hpp>

#include "runtime/trace/timeline_summary.h"

using namespace zl;

namespace {

bool same(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].begin != Approx(b[i].begin) || a[i].end != Approx(b[i].end)) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("interval union, intersection and difference", "[timeline]") {
  const auto u = interval_union({{5, 6}, {0, 2}, {1, 3}, {6, 7}, {4, 4}, {2.5, 2.75}});
  CHECK(same(u, {{0, 3}, {5, 7}}));
  CHECK(total_length(u) == Approx(5.0));
  CHECK(same(interval_intersection(u, {{2, 6}}), {{2, 3}, {5, 6}}));
  CHECK(same(interval_difference(u, {{1, 2}, {6, 8}}), {{0, 1}, {2, 3}, {5, 6}}));
  CHECK(same(interval_difference(u, {{-1, 10}}), {}));
  CHECK(same(interval_difference(u, {}), u));
  // One interval of b across two of a.
  CHECK(same(interval_difference({{0, 2}, {3, 5}}, {{1, 4}}), {{0, 1}, {4, 5}}));
  CHECK(interval_union({}).empty());
}

TEST_CASE("a step's phases, hidden and exposed communication by hand", "[timeline]") {
  // forward 0-4 with a wait for a broadcast at 1-2, backward 4-10, bucket 1 stepped at 10-11.
  // Reductions (buckets by issue order) 5-7 and 8-12, the second enclosing the real collective
  // at 8.5-9 (the simulated link's span around it); broadcasts 11-13 and 13-14.
  const std::vector<TimelineSpan> spans = {
      {"compute", "forward", -1, 0, 4},        {"compute", "wait", -1, 1, 2},
      {"compute", "backward", -1, 4, 10},      {"compute", "optimizer", 1, 10, 11},
      {"comm.reduce", "reduce", -1, 5, 7},     {"comm.reduce", "reduce", -1, 8, 12},
      {"comm.reduce", "reduce", -1, 8.5, 9},   {"comm.broadcast", "broadcast", -1, 11, 13},
      {"comm.broadcast", "broadcast", -1, 13, 14}};
  const TimelineSummary s = summarize_timeline(spans, 2, 15.0);
  CHECK(s.forward_s == Approx(3.0));
  CHECK(s.wait_s == Approx(1.0));
  CHECK(s.backward_s == Approx(6.0));
  CHECK(s.optimizer_s == Approx(1.0));
  CHECK(s.compute_s == Approx(10.0));  // [0,1] + [2,11]
  CHECK(s.reduction_s == Approx(6.0));
  CHECK(s.broadcast_s == Approx(3.0));
  CHECK(s.comm_s == Approx(8.0));  // [5,7] + [8,14]
  CHECK(s.hidden_comm_s == Approx(5.0));   // [5,7] + [8,11]
  CHECK(s.exposed_comm_s == Approx(3.0));  // [11,14]: nothing computes
  CHECK(s.idle_s == Approx(2.0));          // [1,2] (the wait) and [14,15]
  CHECK(s.bucket_reduction_s == std::vector<double>{2.0, 4.0});
  CHECK(s.bucket_broadcast_s == std::vector<double>{2.0, 1.0});
  CHECK(s.bucket_step_s == std::vector<double>{0.0, 1.0});
}

TEST_CASE("exposed communication is never negative and clipped to the window", "[timeline]") {
  // All communication under compute: nothing exposed. None under compute: all of it.
  const TimelineSummary covered = summarize_timeline(
      {{"compute", "backward", -1, 0, 10}, {"comm.reduce", "all_reduce", -1, 2, 5}}, 1, 10.0);
  CHECK(covered.exposed_comm_s == 0.0);
  CHECK(covered.hidden_comm_s == Approx(3.0));
  const TimelineSummary bare = summarize_timeline(
      {{"compute", "backward", -1, 0, 2}, {"comm.reduce", "all_reduce", -1, 3, 5},
       {"comm.broadcast", "broadcast", -1, 4, 20}},
      1, 10.0);
  CHECK(bare.exposed_comm_s == Approx(7.0));  // [3,10]: the broadcast runs past the window
  CHECK(bare.hidden_comm_s == 0.0);
  CHECK(bare.idle_s == Approx(1.0));
  // The clip norm's all-reduce counts as communication but belongs to no bucket.
  const TimelineSummary clip = summarize_timeline(
      {{"comm.reduce", "all_reduce", -1, 0, 1}, {"comm.reduce", "all_reduce_f64", -1, 1, 2},
       {"comm.reduce", "all_reduce", -1, 2, 4}},
      2, 5.0);
  CHECK(clip.comm_s == Approx(4.0));
  CHECK(clip.bucket_reduction_s == std::vector<double>{1.0, 2.0});
}

TEST_CASE("a wait inside backward (a ZeRO stage-2 pool buffer) is not backward's busy time",
          "[timeline]") {
  const TimelineSummary s = summarize_timeline(
      {{"compute", "backward", -1, 0, 10}, {"compute", "wait", 2, 4, 6},
       {"comm.reduce", "reduce_scatter", 0, 3, 6}},
      3, 10.0);
  CHECK(s.backward_s == Approx(8.0));
  CHECK(s.wait_s == Approx(2.0));
  CHECK(s.exposed_comm_s == Approx(2.0));  // [4,6]: the compute stream waits for it
}

TEST_CASE("each tier's communication alone: its streams' union, hidden and exposed", "[timeline]") {
  // Compute: forward 0-4 (a wait at 1-2), backward 4-10. The group's reduce-scatters 5-7 and
  // 9-11 (comm.reduce), the replicas' all-reduces 7-9 and 11-14 (comm.replica), the
  // second enclosing its real collective at 12-13; comm.world's verdict 14-15.
  const std::vector<TimelineSpan> spans = {
      {"compute", "forward", -1, 0, 4},         {"compute", "wait", -1, 1, 2},
      {"compute", "backward", -1, 4, 10},       {"comm.reduce", "reduce_scatter", 0, 5, 7},
      {"comm.reduce", "reduce_scatter", 1, 9, 11}, {"comm.replica", "all_reduce", 0, 7, 9},
      {"comm.replica", "all_reduce", 1, 11, 14},   {"comm.replica", "all_reduce", -1, 12, 13},
      {"comm.world", "all_reduce_f64", -1, 14, 15}};
  const CommCoverage group = comm_coverage(spans, {"comm.reduce", "comm.broadcast"}, 20.0);
  CHECK(group.comm_s == Approx(4.0));
  CHECK(group.hidden_comm_s == Approx(3.0));  // 5-7, 9-10
  CHECK(group.exposed_comm_s == Approx(1.0));  // 10-11
  const CommCoverage replicas = comm_coverage(spans, {"comm.replica", "comm.world"}, 20.0);
  CHECK(replicas.comm_s == Approx(6.0));  // 7-9, 11-15
  CHECK(replicas.hidden_comm_s == Approx(2.0));
  CHECK(replicas.exposed_comm_s == Approx(4.0));
  // The tiers' spans do not overlap each other here, so their exposed parts add up to the
  // whole's.
  const TimelineSummary all = summarize_timeline(spans, 2, 20.0);
  CHECK(all.exposed_comm_s == Approx(group.exposed_comm_s + replicas.exposed_comm_s));
}
