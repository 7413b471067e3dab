// Element shards (runtime/train/plan/shard_layout.h): the padded layout splits every bucket into
// equal, aligned shards without changing the buckets, each rank's stepped range, the balance, and
// the memory figures of stage 1 and stage 2 (docs/design.md, "Element shards").
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "models/model.h"
#include "runtime/config/config.h"
#include "runtime/train/plan/memory_estimate.h"
#include "runtime/train/plan/mode_plan.h"
#include "runtime/train/plan/shard_layout.h"

using namespace zl;
using Catch::Contains;

namespace {

Config config_of(const std::vector<std::string>& overrides) {
  std::vector<std::string> all{"parallel.mode=zero",
                               "parallel.collective=reduce_scatter_allgather"};
  all.insert(all.end(), overrides.begin(), overrides.end());
  // Odd widths (spirals: 2 inputs): sizes that are no multiple of 16, a 3-element bias.
  return parse_config("[model]\nwidths = [2, 37, 19, 3]\n[data]\nkind = \"spirals\"\n", "s.toml",
                      all);
}

ModePlan mode_of(const Config& c) { return make_mode_plan(c.parallel, c.optimizer, c.precision); }

}  // namespace

TEST_CASE("the shard layout pads every bucket into equal aligned shards, same buckets",
          "[shards]") {
  for (const char* cap : {"1e-9", "25"}) {  // a bucket per layer, or one bucket
    for (int world = 1; world <= 4; ++world) {
      INFO("cap " << cap << " world " << world);
      const Config c = config_of({std::string("parallel.bucket_cap_mb=") + cap,
                                  std::string("parallel.first_bucket_cap_mb=") + cap});
      const ModePlan mode = mode_of(c);
      REQUIRE(mode.element_shards);
      CHECK(mode.bucket_collective == CollectiveOp::ReduceScatter);
      CHECK(mode.parameter_collective == CollectiveOp::AllGather);
      const PlannedLayout at = plan_layout(c.model, c.parallel, mode, world);
      const ParameterStore unpadded = Model::parameter_layout(c.model);
      const BucketPlan before = build_bucket_plan(unpadded, c.parallel.bucket_cap_mb,
                                                  c.parallel.first_bucket_cap_mb, world,
                                                  c.parallel.assignment);
      REQUIRE(at.plan.buckets.size() == before.buckets.size());
      CHECK(at.layout.parameter_numel() == unpadded.parameter_numel());
      std::int64_t end = 0;
      for (std::size_t i = 0; i < at.plan.buckets.size(); ++i) {
        const Bucket& b = at.plan.buckets[i];
        CHECK(b.param_ids == before.buckets[i].param_ids);
        CHECK(b.offset == end);  // contiguous
        CHECK(b.numel % (16 * world) == 0);
        CHECK(b.numel >= before.buckets[i].numel);
        end = b.offset + b.numel;
        // Rank r's shard r, 16-element aligned; the shards tile the bucket.
        std::int64_t next = b.offset;
        for (int r = 0; r < world; ++r) {
          const ElementRange shard = mode.stepped_range(at.plan, b, r);
          CHECK(shard.offset == next);
          CHECK(shard.offset % 16 == 0);
          CHECK(shard.numel == b.numel / world);
          next += shard.numel;
        }
        CHECK(next == b.offset + b.numel);
      }
      CHECK(end == at.layout.total_numel());
      // Even: every rank steps the same elements, padding included.
      const StepBalance balance = step_balance(mode, at.plan, at.layout);
      CHECK(balance.largest == balance.smallest);
      CHECK(balance.largest * world == at.layout.total_numel());
    }
  }
  // Bucket modes lay out as before: no padding beyond each parameter's own.
  const Config bucket = config_of({"parallel.collective=reduce_broadcast"});
  const PlannedLayout plain = plan_layout(bucket.model, bucket.parallel, mode_of(bucket), 4);
  CHECK(plain.padding.after.empty());
  CHECK(plain.layout.total_numel() == Model::parameter_layout(bucket.model).total_numel());
}

TEST_CASE("a bucket with fewer elements than ranks gives some ranks only padding", "[shards]") {
  // layers.2 maps 1 unit to 1: a 1-element weight and a 1-element bias, one bucket of 2 elements
  // (a tiny cap gives every module its own bucket), padded to 64 on 4 ranks.
  Config c = parse_config("[model]\nwidths = [2, 8, 1, 1, 3]\n[data]\nkind = \"spirals\"\n",
                          "s.toml",
                          {"parallel.mode=zero", "parallel.collective=reduce_scatter_allgather",
                           "parallel.bucket_cap_mb=1e-9", "parallel.first_bucket_cap_mb=1e-9"});
  const ModePlan mode = mode_of(c);
  const int world = 4;
  const PlannedLayout at = plan_layout(c.model, c.parallel, mode, world);
  const Bucket* tiny = nullptr;
  for (const Bucket& b : at.plan.buckets) {
    if (at.layout.info(b.param_ids.front()).name.rfind("layers.2.", 0) == 0) tiny = &b;
  }
  REQUIRE(tiny != nullptr);
  REQUIRE(tiny->param_ids.size() == 2);
  CHECK(tiny->numel == 16 * world);
  std::vector<std::int64_t> real(world, 0);
  for (int r = 0; r < world; ++r) {
    const ElementRange shard = mode.stepped_range(at.plan, *tiny, r);
    for (int id : tiny->param_ids) {
      const ParameterInfo& p = at.layout.info(id);
      real[r] += std::max<std::int64_t>(std::min(p.offset + p.numel, shard.offset + shard.numel) -
                                            std::max(p.offset, shard.offset),
                                        0);
    }
  }
  CHECK(real == std::vector<std::int64_t>{1, 1, 0, 0});  // the weight, the bias, padding twice
  const StepBalance balance = step_balance(mode, at.plan, at.layout);
  CHECK(balance.largest == balance.smallest);
  CHECK(balance.largest_parameters >= balance.smallest_parameters);
}

TEST_CASE("memory figures of element shards: stage 1 and stage 2 with its pool", "[shards]") {
  Config c = config_of({"parallel.bucket_cap_mb=1e-9", "parallel.first_bucket_cap_mb=1e-9"});
  c.precision.compute = ComputePrecision::Bf16;  // set directly: the figures need no bf16 GEMM
  const int world = 3;
  const ModePlan one = mode_of(c);
  const PlannedLayout at = plan_layout(c.model, c.parallel, one, world);
  const std::int64_t total = at.layout.total_numel();
  for (int r = 0; r < world; ++r) {
    const RankMemory m = rank_memory(one, at.plan, total, r);
    CHECK(m.parameters == total * 2);
    CHECK(m.gradients == total * 4);
    CHECK(m.master == total / world * 4);  // exactly total / world: invariant 5
    CHECK(m.state == total / world * 8);
    CHECK(m.gradient_pool == 0);
  }
  CHECK(bytes_per_parameter_formula(one) == "2 + 4 + 12/d");
  CHECK(one.name() == "zero/none/reduce_scatter_allgather");

  c.parallel.zero_stage = 2;
  const ModePlan two = mode_of(c);
  CHECK(two.name() == "zero2/none/reduce_scatter_allgather");
  CHECK(bytes_per_parameter_formula(two) == "2 + 16/d + pool");
  for (int r = 0; r < world; ++r) {  // the formula at d = world: exactly total / world each
    const RankMemory shard = rank_memory(two, at.plan, total, r);
    CHECK(shard.buffers() - shard.gradient_pool == total * 2 + total / world * 16);
  }
  const RankMemory m = rank_memory(two, at.plan, total, 1);
  CHECK(m.gradient_pool == kGradientPoolBuffers * at.plan.largest_bucket_numel() * 4);
  CHECK(m.gradients == total / world * 4 + m.gradient_pool);
  // A bf16 wire adds 2 bytes per pool element, not per parameter.
  c.precision.reduce_dtype = DType::BF16;
  const RankMemory wire = rank_memory(mode_of(c), at.plan, total, 1);
  CHECK(wire.gradient_pool == kGradientPoolBuffers * at.plan.largest_bucket_numel() * 6);
  // One bucket: one pool buffer.
  c.parallel.bucket_cap_mb = c.parallel.first_bucket_cap_mb = 25;
  const PlannedLayout single = plan_layout(c.model, c.parallel, mode_of(c), world);
  REQUIRE(single.plan.buckets.size() == 1);
  CHECK(rank_memory(mode_of(c), single.plan, single.layout.total_numel(), 0).gradient_pool ==
        single.plan.largest_bucket_numel() * 6);
}

TEST_CASE("at 512 ranks the even split fits where one bucket per rank does not", "[shards]") {
  // The figures: configs/bench_large.toml, bf16, 512 ranks. Bucket ownership leaves a
  // fifth of the model's state on one rank (758 MiB); the even split needs at most 600 MiB at
  // stage 1 and 420 MiB at stage 2, and its ranks step equal parts.
  const std::string path = std::string(ZEROLAP_SOURCE_DIR) + "/configs/bench_large.toml";
  Config c = load_config(path, {"parallel.mode=zero"});
  c.precision.compute = ComputePrecision::Bf16;
  const int world = 512;
  const auto peak_mib = [&](const Config& config) {
    const ModePlan mode = mode_of(config);
    const PlannedLayout at = plan_layout(config.model, config.parallel, mode, world);
    const RankMemory peak = estimate_peak_rank_memory(config, at.layout, at.plan, mode);
    return static_cast<double>(peak.total()) / (1024.0 * 1024.0);
  };
  CHECK(peak_mib(c) > 700.0);
  c.parallel.collective = CollectiveKind::ReduceScatterAllgather;
  CHECK(peak_mib(c) <= 600.0);
  const ModePlan mode = mode_of(c);
  const PlannedLayout at = plan_layout(c.model, c.parallel, mode, world);
  // Every rank steps (and allocates state for) the same elements: the step is balanced. The
  // padding of each bucket is at its end, in the last rank's shard, so that rank's share of real
  // parameters is smaller by at most a bucket's padding each.
  const StepBalance balance = step_balance(mode, at.plan, at.layout);
  CHECK(balance.largest == balance.smallest);
  CHECK(balance.largest - balance.smallest_parameters <=
        static_cast<std::int64_t>(at.plan.buckets.size()) * 16 * world);
  c.parallel.zero_stage = 2;
  CHECK(peak_mib(c) <= 420.0);
  // Stage 3: the parameters over 512 too, plus two gather buffers of the largest bucket.
  c.parallel.zero_stage = 3;
  CHECK(peak_mib(c) <= 300.0);
}

TEST_CASE("zero_stage and the shard collective are checked against the other keys", "[shards]") {
  const char* base = "[model]\nwidths = [2, 8, 3]\n[data]\nkind = \"spirals\"\n";
  CHECK(parse_config(base, "c.toml").parallel.zero_stage == 1);
  CHECK_THROWS_WITH(parse_config(base, "c.toml", {"parallel.zero_stage=4"}),
                    Contains("parallel.zero_stage"));
  CHECK_THROWS_WITH(parse_config(base, "c.toml", {"parallel.zero_stage=0"}),
                    Contains("parallel.zero_stage"));
  // Stage 2 needs the element split: named with the collective it needs.
  CHECK_THROWS_WITH(parse_config(base, "c.toml", {"parallel.mode=zero", "parallel.zero_stage=2"}),
                    Contains("parallel.zero_stage") &&
                        Contains("parallel.collective = \"reduce_scatter_allgather\"") &&
                        Contains("collective = \"allreduce_broadcast\""));
  CHECK_THROWS_WITH(parse_config(base, "c.toml", {"parallel.zero_stage=2"}),
                    Contains("parallel.zero_stage") && Contains("mode = \"ddp\""));
  CHECK_THROWS_WITH(parse_config(base, "c.toml",
                                 {"parallel.mode=zero", "parallel.zero_stage=2",
                                  "parallel.collective=reduce_broadcast"}),
                    Contains("parallel.zero_stage") &&
                        Contains("collective = \"reduce_broadcast\""));
  CHECK_THROWS_WITH(
      parse_config(base, "c.toml", {"parallel.collective=reduce_scatter_allgather"}),
      Contains("parallel.collective") && Contains("\"reduce_scatter_allgather\" applies to mode = "
                                                  "\"zero\" only"));
  const Config two = parse_config(base, "c.toml",
                                  {"parallel.mode=zero", "parallel.zero_stage=2",
                                   "parallel.collective=reduce_scatter_allgather"});
  CHECK(two.parallel.zero_stage == 2);
  CHECK_THAT(to_toml(two), Contains("zero_stage = 2") &&
                               Contains("collective = \"reduce_scatter_allgather\""));
  // The effective config reads back as itself.
  CHECK(to_toml(parse_config(to_toml(two), "again.toml")) == to_toml(two));
  // Stage 3 likewise needs the element split, and its own keys are range- and type-checked.
  CHECK_THROWS_WITH(
      parse_config(base, "c.toml",
                   {"parallel.mode=zero", "parallel.collective=reduce_broadcast",
                    "parallel.zero_stage=3"}),
      Contains("parallel.zero_stage: 3 shards the parameters,") &&
          Contains("collective = \"reduce_broadcast\""));
  const std::vector<std::string> three_keys = {"parallel.mode=zero", "parallel.zero_stage=3",
                                               "parallel.collective=reduce_scatter_allgather"};
  auto three_with = [&](const std::string& key) {
    std::vector<std::string> keys = three_keys;
    keys.push_back(key);
    return keys;
  };
  CHECK_THROWS_WITH(parse_config(base, "c.toml", three_with("parallel.prefetch=-1")),
                    Contains("parallel.prefetch"));
  CHECK_THROWS_WITH(parse_config(base, "c.toml", three_with("parallel.prefetch=65")),
                    Contains("parallel.prefetch"));
  CHECK_THROWS_WITH(parse_config(base, "c.toml", three_with("parallel.reshard_after_forward=1")),
                    Contains("parallel.reshard_after_forward"));
  const Config three = parse_config(base, "c.toml",
                                    three_with("parallel.reshard_after_forward=false"));
  CHECK(three.parallel.zero_stage == 3);
  CHECK(three.parallel.prefetch == 1);
  CHECK_FALSE(three.parallel.reshard_after_forward);
  CHECK(to_toml(parse_config(to_toml(three), "again.toml")) == to_toml(three));
}
