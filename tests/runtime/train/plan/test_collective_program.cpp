// The collective program of a step (Note [Collective program]): its order per communicator, and
// the check that compares what a step issues against it.
#include <catch2/catch.hpp>

#include "base/errors.h"
#include "models/model.h"
#include "runtime/config/mode.h"
#include "runtime/train/plan/bucket_plan.h"
#include "runtime/train/plan/collective_program.h"

using namespace zl;

namespace {

BucketPlan three_buckets() {
  ModelSpec spec;
  spec.widths = {4, 16, 16, 3};
  static const Model m(spec, DeviceKind::Cpu);
  return build_bucket_plan(m.store(), 1e-9, 1e-9, 2, AssignmentPolicy::RoundRobin);
}

ModePlan plan_of(const char* name) {
  return make_mode_plan(*parse_mode(name), ParallelConfig{}, OptimizerConfig{});
}

std::vector<int> buckets_on(const std::vector<ProgramEntry>& program, CommRole comm) {
  std::vector<int> out;
  for (const ProgramEntry& e : program) {
    if (e.comm == comm) out.push_back(e.bucket);
  }
  return out;
}

}  // namespace

TEST_CASE("a program lists each communicator's collectives in issue order", "[program]") {
  const BucketPlan plan = three_buckets();
  REQUIRE(plan.buckets.size() == 3);
  const auto ddp = collective_program(plan_of("ddp"), plan);
  CHECK(buckets_on(ddp, CommRole::Reduce) == std::vector<int>{0, 1, 2});
  CHECK(buckets_on(ddp, CommRole::Broadcast).empty());
  // Interleaved publishes the last bucket before the second-to-last (Note [Tail broadcast order]).
  const auto inter = collective_program(plan_of("zero/interleaved/reduce_broadcast"), plan);
  CHECK(buckets_on(inter, CommRole::Broadcast) == std::vector<int>{0, 2, 1});
  for (const ProgramEntry& e : inter) {
    CHECK(e.root == plan.buckets[static_cast<std::size_t>(e.bucket)].assigned_rank);
  }
  const auto after = collective_program(plan_of("zero/after_backward/allreduce_broadcast"), plan);
  CHECK(buckets_on(after, CommRole::Broadcast) == std::vector<int>{0, 1, 2});
}

TEST_CASE("the program check names both collectives on a mismatch and wraps at the step's end",
          "[program]") {
  const BucketPlan plan = three_buckets();
  const auto program = collective_program(plan_of("zero/none/allreduce_broadcast"), plan);
  ProgramCheck check(program);
  for (int step = 0; step < 2; ++step) {
    for (const ProgramEntry& e : program) check.issued(e);
  }
  CHECK(check.checked(CommRole::Reduce) == 6);
  CHECK(check.checked(CommRole::Broadcast) == 6);
  // A skipped step publishes nothing.
  for (const ProgramEntry& e : program) {
    if (e.comm == CommRole::Reduce) check.issued(e);
  }
  check.skip(CommRole::Broadcast, CollectiveOp::Broadcast, 3);
  ProgramEntry wrong = program.front();
  wrong.bucket = 2;
  CHECK_THROWS_AS(check.issued(wrong), InternalError);
  ProgramCheck fresh(program);
  CHECK_THROWS_WITH(fresh.issued(wrong),
                    Catch::Contains("comm.reduce all_reduce of bucket 2") &&
                        Catch::Contains("comm.reduce all_reduce of bucket 0"));
  CHECK_THROWS_AS(fresh.skip(CommRole::Reduce, CollectiveOp::Broadcast, 1), InternalError);
}
