// The per-rank memory estimate (runtime/train/plan/memory_estimate.h): its figures, which are
// ModePlan's rank_memory plus activations and follow the precision, and the refusal of a run that
// does not fit, naming the key to change. (That the trainer allocates these figures: tests/mpi/
// test_rank_memory.cpp.)
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "base/errors.h"
#include "models/model.h"
#include "runtime/config/config.h"
#include "runtime/train/plan/memory_estimate.h"
#include "runtime/train/plan/memory_limit.h"

using namespace zl;
using Catch::Contains;

namespace {

Config config_of(const std::vector<std::string>& overrides) {
  return parse_config(R"(
[model]
kind = "mlp"
widths = [784, 256, 10]
[data]
kind = "fashion_mnist"
batch_size = 64
eval_batch_size = 1000
[optimizer]
kind = "adam"
)",
                      "x.toml", overrides);
}

RankMemory estimate(const Config& c, int ranks, int rank = 0) {
  const ParameterStore layout = Model::parameter_layout(c.model);
  const BucketPlan plan = build_bucket_plan(layout, c.parallel.bucket_cap_mb,
                                            c.parallel.first_bucket_cap_mb, ranks,
                                            c.parallel.assignment);
  return estimate_rank_memory(c, layout, plan,
                              make_mode_plan(c.parallel, c.optimizer, c.precision), rank);
}

constexpr std::int64_t kGiB = std::int64_t{1} << 30;

}  // namespace

TEST_CASE("the estimate counts parameters, gradients, the rank's state and activations",
          "[memory]") {
  const Config c = config_of({});
  const RankMemory m = estimate(c, 1);
  const std::int64_t numel = Model::parameter_layout(c.model).total_numel();
  CHECK(numel >= 784 * 256 + 256 + 256 * 10 + 10);
  CHECK(m.parameters == numel * 4);
  CHECK(m.gradients == numel * 4);
  CHECK(m.state == 2 * numel * 4);  // Adam: exp_avg and exp_avg_sq
  // Evaluation's 1000 samples outweigh training's 64: (784 + 2 * (256 + 10)) floats each.
  CHECK(m.eval_activations);
  CHECK(m.activations == 1000 * (784 + 2 * (256 + 10)) * 4);
  CHECK(m.total() == m.parameters + m.gradients + m.state + m.activations);
  // zero shards the state: each of 4 ranks holds a part, never more than ddp's whole.
  const Config zero = config_of({"parallel.mode=zero", "parallel.bucket_cap_mb=0.1"});
  std::int64_t states = 0;
  for (int r = 0; r < 4; ++r) states += estimate(zero, 4, r).state;
  CHECK(states == m.state);
}

TEST_CASE("the estimate follows the precision: ModePlan's rank_memory plus activations",
          "[memory]") {
  const Config fp32 = config_of({});
  const RankMemory base = estimate(fp32, 1);
  const std::int64_t numel = Model::parameter_layout(fp32.model).total_numel();
  // tf32 stores fp32: the same bytes.
  const RankMemory tf32 = estimate(config_of({"precision.compute=tf32"}), 1);
  CHECK(tf32.total() == base.total());
  CHECK(tf32.master == 0);
  // bf16 (set directly: the config refuses bf16 where the CPU GEMM has none, and the figures do
  // not depend on the GEMM): bf16 parameters and activations, fp32 gradients, fp32 masters.
  Config bf16 = fp32;
  bf16.precision.compute = ComputePrecision::Bf16;
  const RankMemory b = estimate(bf16, 1);
  CHECK(b.parameters == numel * 2);
  CHECK(b.gradients == numel * 4);
  CHECK(b.master == numel * 4);
  CHECK(b.state == numel * 8);
  CHECK(b.activations * 2 == base.activations);
  CHECK(b.total() == b.parameters + b.gradients + b.master + b.state + b.activations);
  CHECK_THAT(describe_memory(b), Contains("master "));
  CHECK_THAT(describe_memory(base), !Contains("master"));
  // bf16 gradients on the wire add their buffer; remainders halve the masters.
  bf16.precision.reduce_dtype = DType::BF16;
  bf16.precision.master_weights = MasterWeights::Remainders;
  const RankMemory r = estimate(bf16, 1);
  CHECK(r.gradients == numel * 6);
  CHECK(r.master == numel * 2);
  // zero shards the masters with the state; every rank's figures are rank_memory's.
  bf16.parallel.mode = ParallelMode::Zero;
  bf16.parallel.bucket_cap_mb = 0.1;
  const ParameterStore layout = Model::parameter_layout(bf16.model);
  const BucketPlan plan = build_bucket_plan(layout, 0.1, bf16.parallel.first_bucket_cap_mb, 4,
                                            bf16.parallel.assignment);
  const ModePlan mode = make_mode_plan(bf16.parallel, bf16.optimizer, bf16.precision);
  std::int64_t masters = 0;
  for (int rank = 0; rank < 4; ++rank) {
    const RankMemory m = estimate_rank_memory(bf16, layout, plan, mode, rank);
    const RankMemory want = rank_memory(mode, plan, layout.total_numel(), rank);
    CHECK(m.buffers() == want.total());
    CHECK(m.master == want.master);
    masters += m.master;
  }
  CHECK(masters == numel * 2);
}

TEST_CASE("a model too large to allocate is still laid out and estimated", "[memory]") {
  // [784, 100000000, 10] used to end `zerolap plan` with a bare std::bad_alloc.
  const Config c = config_of({"model.widths=[784, 100000000, 10]"});
  const RankMemory m = estimate(c, 1);
  CHECK(m.parameters > std::int64_t{784} * 100000000 * 4);
  CHECK_THAT(describe_memory(m), Contains("TiB") && Contains("optimizer state"));
}

TEST_CASE("a run that does not fit is refused naming the figure and the key", "[memory]") {
  AvailableMemory eight_gib;
  eight_gib.host_bytes = 8 * kGiB;
  SECTION("parameters: model.widths") {
    // The OOM kill of the issue: 5e6 hidden units, ~100 GB per rank.
    const Config c = config_of({"model.widths=[784, 5000000, 10]", "data.eval_batch_size=10"});
    const RankMemory m = estimate(c, 1);
    CHECK_THROWS_AS(check_memory_fits(m, c, DeviceKind::Cpu, eight_gib, 1), UserError);
    CHECK_THROWS_WITH(check_memory_fits(m, c, DeviceKind::Cpu, eight_gib, 1),
                      Contains("x.toml: one rank needs an estimated") &&
                          Contains("8.00 GiB available (MemAvailable)") &&
                          Contains("lower model.widths"));
  }
  SECTION("both parts too large: both keys") {
    const Config c = config_of({"model.widths=[784, 5000000, 10]"});
    CHECK_THROWS_WITH(check_memory_fits(estimate(c, 1), c, DeviceKind::Cpu, eight_gib, 1),
                      Contains("lower model.widths and data.eval_batch_size"));
  }
  SECTION("evaluation activations: data.eval_batch_size") {
    const Config c = config_of({"data.eval_batch_size=10000000"});
    CHECK_THROWS_WITH(check_memory_fits(estimate(c, 1), c, DeviceKind::Cpu, eight_gib, 1),
                      Contains("data.eval_batch_size"));
  }
  SECTION("training activations: data.batch_size") {
    const Config c = config_of({"data.batch_size=10000000"});
    CHECK_THROWS_WITH(check_memory_fits(estimate(c, 1), c, DeviceKind::Cpu, eight_gib, 1),
                      Contains("lower data.batch_size"));
  }
  SECTION("the node's ranks share its memory") {
    const Config c = config_of({});
    const RankMemory m = estimate(c, 1);
    AvailableMemory just;
    just.host_bytes = m.total();
    CHECK_NOTHROW(check_memory_fits(m, c, DeviceKind::Cpu, just, 1));
    CHECK_THROWS_WITH(check_memory_fits(m, c, DeviceKind::Cpu, just, 2), Contains("for its 2 ranks"));
  }
  SECTION("on a GPU its free memory counts, and unknown memory is not checked") {
    const Config c = config_of({"model.widths=[784, 5000000, 10]"});
    AvailableMemory gpu;
    gpu.device_bytes = kGiB;
    CHECK_THROWS_WITH(check_memory_fits(estimate(c, 1), c, DeviceKind::Cuda, gpu, 8),
                      Contains("the GPU has 1.00 GiB free"));
    CHECK_NOTHROW(check_memory_fits(estimate(c, 1), c, DeviceKind::Cpu, AvailableMemory{}, 1));
  }
}

TEST_CASE("runtime.memory_limit_mb names the batch key whose activations dominate", "[memory]") {
  // When no stage, precision, bucket size or rank count fits, the advice names the key that sizes
  // the larger part of the estimate: data.eval_batch_size when evaluation's activations are the
  // larger, where no data.batch_size fits.
  SECTION("evaluation's activations: data.eval_batch_size") {
    // The buffers fit 4 MiB; evaluation's activations do not, even in bf16.
    const Config c = config_of({"runtime.memory_limit_mb=4", "data.eval_batch_size=4000"});
    REQUIRE(estimate(c, 1).eval_activations);
    REQUIRE_THROWS_AS(check_memory_limit(c, 1), UserError);
    CHECK_THROWS_WITH(check_memory_limit(c, 1),
                      Contains("lower data.eval_batch_size (the evaluation batch per rank)") &&
                          !Contains("data.batch_size") && !Contains("model.widths"));
  }
  SECTION("training's activations: data.batch_size") {
    const Config c = config_of({"runtime.memory_limit_mb=2", "data.batch_size=100000"});
    CHECK_THROWS_WITH(check_memory_limit(c, 1),
                      Contains("lower data.batch_size") && !Contains("data.eval_batch_size"));
  }
  SECTION("the model's buffers first, and the batch too when its activations alone are above") {
    const Config c = config_of({"runtime.memory_limit_mb=0.01", "model.widths=[784, 5000, 10]",
                                "data.eval_batch_size=10"});
    CHECK_THROWS_WITH(check_memory_limit(c, 1),
                      Contains("lower model.widths and data.batch_size"));
  }
}

TEST_CASE("the layout without allocation is the model's layout", "[memory]") {
  ModelSpec mlp, residual;
  mlp.widths = {6, 5, 4, 3};
  residual.kind = ModelKind::ResidualMlp;
  residual.widths = {6, 8, 8, 8, 3};
  for (const ModelSpec& spec : {mlp, residual}) {
    const ParameterStore layout = Model::parameter_layout(spec);
    const Model model(spec, DeviceKind::Cpu);
    REQUIRE(layout.count() == model.store().count());
    CHECK(layout.total_numel() == model.store().total_numel());
    for (int id = 0; id < layout.count(); ++id) {
      CHECK(layout.info(id).name == model.store().info(id).name);
      CHECK(layout.info(id).offset == model.store().info(id).offset);
      CHECK(layout.info(id).shape == model.store().info(id).shape);
    }
  }
}

TEST_CASE("runtime.memory_limit_mb's advice under hybrid sharding names parallel.shard_group",
          "[memory]") {
  // With a shard group of G, a rank's state is sharded G ways whatever the world size: the advice
  // names a larger group, never more ranks alone, and never a world size G does not divide.
  const auto hybrid = [](int group, const char* limit_mb) {
    return config_of({"model.widths=[784, 1024, 1024, 10]", "data.batch_size=4",
                      "data.eval_batch_size=4", "parallel.mode=\"zero\"",
                      "parallel.collective=\"reduce_scatter_allgather\"", "parallel.zero_stage=3",
                      fmt::format("parallel.shard_group={}", group),
                      fmt::format("runtime.memory_limit_mb={}", limit_mb)});
  };
  SECTION("a larger group") {
    // 4 ranks in groups of 2 need about 42.6 MiB (a whole-model bucket gathered); in one group
    // of 4, about 35.5 MiB.
    const Config c = hybrid(2, "38");
    CHECK_THROWS_WITH(check_memory_limit(c, 4),
                      Contains("parallel.shard_group = 4 (") && !Contains(" ranks ("));
  }
  SECTION("no world size the group does not divide") {
    // The settings together fit at 3 ranks (about 22.7 MiB), and would at 4 ranks in groups of 3.
    const Config c = hybrid(3, "30");
    CHECK_THROWS_WITH(check_memory_limit(c, 3), Contains("it fits with") &&
                                                    !Contains("4 ranks") && !Contains("8 ranks"));
  }
}
