// The bucket plan for known shapes: order (reverse layers), sizes, the first-bucket cap, never
// splitting a parameter or a module, and both assignment policies.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "models/model.h"
#include "runtime/train/plan/bucket_plan.h"
#include "runtime/train/plan/mode_plan.h"
#include "runtime/train/plan/plan_report.h"

using namespace zl;

namespace {

// mlp [8, 32, 32, 4]: layout order (Note [Flat layout]) with 16-float alignment:
//   layers.2.bias 4 (+12 pad) @0, layers.2.weight 128 @16, layers.1.bias 32 @144,
//   layers.1.weight 1024 @176, layers.0.bias 32 @1200, layers.0.weight 256 @1232; total 1488.
Model small_model() {
  ModelSpec spec;
  spec.widths = {8, 32, 32, 4};
  return Model(spec, DeviceKind::Cpu);
}

constexpr double kMiB = 1024.0 * 1024.0;

ParallelConfig zero_config() {
  ParallelConfig p;
  p.mode = ParallelMode::Zero;
  return p;
}

std::vector<std::string> names(const Model& m, const Bucket& b) {
  std::vector<std::string> out;
  for (int id : b.param_ids) out.push_back(m.store().info(id).name);
  return out;
}

}  // namespace

TEST_CASE("buckets follow reverse layer order, keep modules whole and respect both caps",
          "[plan]") {
  const Model m = small_model();
  REQUIRE(m.store().total_numel() == 1488);
  // Modules in layout order: layers.2 = 16 + 512 B, layers.1 = 128 + 4096 B, layers.0 = 128 +
  // 1024 B. First cap 600 B: layers.2 fits. Cap 4400 B: layers.1 fits, adding layers.0 would not
  // (cutting by parameter would have put layers.0.bias into bucket 1 and its weight into 2).
  const BucketPlan plan = build_bucket_plan(m.store(), 4400 / kMiB, 600 / kMiB, 2,
                                            AssignmentPolicy::RoundRobin);
  REQUIRE(plan.buckets.size() == 3);
  CHECK(names(m, plan.buckets[0]) == std::vector<std::string>{"layers.2.bias", "layers.2.weight"});
  CHECK(names(m, plan.buckets[1]) == std::vector<std::string>{"layers.1.bias", "layers.1.weight"});
  CHECK(names(m, plan.buckets[2]) == std::vector<std::string>{"layers.0.bias", "layers.0.weight"});
  CHECK(plan.buckets[0].offset == 0);
  CHECK(plan.buckets[0].numel == 144);
  CHECK(plan.buckets[1].offset == 144);
  CHECK(plan.buckets[1].numel == 1056);
  CHECK(plan.buckets[2].offset == 1200);
  CHECK(plan.buckets[2].numel == 288);
  CHECK(plan.buckets[1].bytes() == 1056 * 4);
  // Round robin: index mod world size.
  CHECK(plan.buckets[0].assigned_rank == 0);
  CHECK(plan.buckets[1].assigned_rank == 1);
  CHECK(plan.buckets[2].assigned_rank == 0);
  for (int id = 0; id < m.store().count(); ++id) {
    const Bucket& b = plan.buckets[plan.bucket_of_param[id]];
    CHECK(std::find(b.param_ids.begin(), b.param_ids.end(), id) != b.param_ids.end());
  }
}

TEST_CASE("greedy assignment balances bucket sizes", "[plan]") {
  const Model m = small_model();
  const BucketPlan plan =
      build_bucket_plan(m.store(), 4400 / kMiB, 600 / kMiB, 2, AssignmentPolicy::Greedy);
  // Largest first onto the least-loaded rank: 1056 -> 0, 288 -> 1, 144 -> 1.
  CHECK(plan.buckets[1].assigned_rank == 0);
  CHECK(plan.buckets[2].assigned_rank == 1);
  CHECK(plan.buckets[0].assigned_rank == 1);
  CHECK(plan.numel_assigned_to(0) == 1056);
  CHECK(plan.numel_assigned_to(1) == 432);
}

TEST_CASE("a tiny cap gives one module per bucket; a huge cap gives one bucket", "[plan]") {
  const Model m = small_model();
  const BucketPlan tiny = build_bucket_plan(m.store(), 1e-9, 1e-9, 4, AssignmentPolicy::RoundRobin);
  REQUIRE(tiny.buckets.size() == 3);
  std::int64_t covered = 0;
  for (const auto& b : tiny.buckets) {
    CHECK(b.param_ids.size() == 2);  // a module larger than the cap gets a bucket alone, whole
    CHECK(b.offset == covered);      // contiguous, no gaps
    CHECK(b.assigned_rank == b.index % 4);
    covered += b.numel;
  }
  CHECK(covered == m.store().total_numel());
  const BucketPlan one = build_bucket_plan(m.store(), 25.0, 25.0, 3, AssignmentPolicy::Greedy);
  REQUIRE(one.buckets.size() == 1);
  CHECK(one.buckets[0].numel == m.store().total_numel());
  CHECK(one.largest_bucket_numel() == 1488);
}

TEST_CASE("only parameters named under the same module share a bucket past the cap", "[plan]") {
  ParameterStore store;
  store.add("a", {4});          // no module: alone
  store.add("b", {4});          // no module: alone
  store.add("block.w", {4});    // block: together
  store.add("block.b", {4});
  store.add("block.x.w", {4});  // block.x is another module
  store.finalize(DeviceKind::Cpu);
  const BucketPlan plan = build_bucket_plan(store, 1e-9, 1e-9, 1, AssignmentPolicy::RoundRobin);
  std::vector<std::vector<std::string>> got;
  for (const auto& b : plan.buckets) {
    got.emplace_back();
    for (int id : b.param_ids) got.back().push_back(store.info(id).name);
  }
  // Layout order is reverse registration order.
  CHECK(got == std::vector<std::vector<std::string>>{
                   {"block.x.w"}, {"block.b", "block.w"}, {"b"}, {"a"}});
}

TEST_CASE("the first bucket's cap applies to bucket 0 only", "[plan]") {
  const Model m = small_model();
  // First cap 16 B: layers.2 (528 B) is larger, so it is bucket 0 alone; then a 25 MiB cap takes
  // everything else.
  const BucketPlan plan = build_bucket_plan(m.store(), 25.0, 16 / kMiB, 1, AssignmentPolicy::RoundRobin);
  REQUIRE(plan.buckets.size() == 2);
  CHECK(names(m, plan.buckets[0]) == std::vector<std::string>{"layers.2.bias", "layers.2.weight"});
  CHECK(plan.buckets[1].param_ids.size() == 4);
}

TEST_CASE("the plan table lists buckets and per-rank optimizer state", "[plan]") {
  const Model m = small_model();
  const BucketPlan plan = build_bucket_plan(m.store(), 4400 / kMiB, 600 / kMiB, 2,
                                            AssignmentPolicy::RoundRobin);
  OptimizerConfig adam;
  const std::string zero = format_bucket_plan(plan, m.store(), make_mode_plan(zero_config(), adam));
  CHECK_THAT(zero, Catch::Contains("layers.1.bias, layers.1.weight\n"));
  CHECK_THAT(zero, Catch::Contains("3 buckets, 6 parameters"));
  // Rank 0 owns buckets 0 and 2 (144 + 288 elements): Adam state = 2 x 432 x 4 B = 3.375 KiB.
  CHECK_THAT(zero, Catch::Contains("3.4 KiB"));
  const std::string ddp = format_bucket_plan(plan, m.store(), make_mode_plan(ParallelConfig{}, adam));
  // ddp: every rank holds the full state, 2 x 1488 x 4 B = 11.6 KiB, and steps every bucket (its
  // rows showed the bucket owners' split of zero beside it).
  CHECK_THAT(ddp, Catch::Contains("11.6 KiB"));
  for (const char* rank : {"0", "1"}) {
    CHECK_THAT(ddp, Catch::Contains(fmt::format("{:>6}  {:>8}  {:>14}  {:>16}\n", rank, 3, 1488,
                                                "11.6 KiB")));
  }
  CHECK_THAT(ddp, Catch::Contains("       all  layers.1.bias") && !Catch::Contains(" 0  layers"));
}
