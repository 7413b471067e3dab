// Hybrid sharding (parallel.shard_group, Note [Replica all-reduce]): element shards inside groups
// of G consecutive ranks, replicated across the groups. Every overlap x stage x precision on 4
// ranks as 2 groups of 2, with grad_accum 1 and 3, matches ddp after 20 steps with every rank
// bitwise identical after every step; a group of the whole world is the flat mode bit for bit; a
// group of one rank is ddp whose step runs in the all-reduce's completion; clipping gets one
// global norm; the allocations equal the plan's; a checkpoint of 4 ranks in 2 groups at stage 3
// goes to 3 ranks flat at stage 1, to 1 rank ddp and back, bitwise; a group that does not divide
// the world is exit 2 naming both.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "mpi_test_util.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/checkpoint_saver.h"
#include "runtime/checkpoint/files/shard_manifest.h"
#include "runtime/config/global_batch.h"
#include "runtime/train/plan/memory_estimate.h"
#include "runtime/train/plan/shard_layout.h"

using namespace zl;
using namespace zl::test;

namespace {

constexpr int kSteps = 20;

const std::vector<std::string> kBuckets = {"parallel.bucket_cap_mb=0.004",
                                           "parallel.first_bucket_cap_mb=0.001"};

std::vector<std::string> hybrid(const char* overlap, int stage, int group) {
  return {"parallel.mode=zero", std::string("parallel.overlap=") + overlap,
          "parallel.collective=reduce_scatter_allgather",
          fmt::format("parallel.zero_stage={}", stage), fmt::format("parallel.shard_group={}", group)};
}

std::vector<float> train(const Config& config, const World& world, int steps = kSteps) {
  Trainer trainer(config, world, quiet_options());
  train_checking_identity(trainer, steps);
  return named_parameters(trainer);
}

// The tolerance against ddp. A hybrid bucket's gradient is summed in two stages - inside the
// group by the reduce-scatter, then the groups' sums by the replicas' all-reduce - where ddp's
// all-reduce adds the ranks' gradients in MPI's own order, so an element may differ by an fp32
// ulp and the runs drift within invariant 3's rtol 1e-5, atol 1e-6; in bf16 such an ulp may flip
// a rounding, as in the flat element-shard tests (tests/mpi/test_element_shards.cpp): 4 bf16 ulps
// plus 2e-3, and twice that where stages 2 and 3 round each micro-batch's sum to a bf16 wire.
void check_matches(const std::vector<float>& got, const std::vector<float>& ddp, bool bf16,
                   bool rounded_per_micro_batch) {
  const double worst = worst_against_ddp(got, ddp, bf16, rounded_per_micro_batch);
  INFO("worst |hybrid - ddp| / tolerance = " << worst);
  CHECK(worst <= 1.0);
}

}  // namespace

TEST_CASE("hybrid sharding on 2 groups of 2 matches ddp in every overlap, stage and precision",
          "[hybrid]") {
  const World world = world_of(MPI_COMM_WORLD);
  REQUIRE(world.size == 4);
  for (const Precision& precision : kPrecisions) {
    for (const int accum : {1, 3}) {
      const auto base = with(with(kBuckets, precision.keys),
                             {fmt::format("train.grad_accum={}", accum)});
      const std::vector<float> ddp = train(small_config(with(base, {"parallel.mode=ddp"})), world);
      for (const char* overlap : {"none", "after_backward", "interleaved"}) {
        std::vector<float> stage2;
        for (const int stage : {1, 2, 3}) {
          const auto overrides = with(base, hybrid(overlap, stage, 2));
          INFO(precision.name << ", " << describe(overrides));
          const std::vector<float> got = train(small_config(overrides), world);
          check_matches(got, ddp, precision.bf16, stage >= 2 && accum > 1 && precision.bf16_wire);
          // Stage 3 reduces and steps as stage 2 and reads the gathered bits of its shards.
          if (stage == 2) stage2 = got;
          if (stage == 3) CHECK(bitwise_equal(got, stage2));
        }
      }
    }
  }
}

TEST_CASE("a shard group of every rank is the flat mode bit for bit; a group of one is ddp",
          "[hybrid-edges]") {
  const World world = world_of(MPI_COMM_WORLD);
  const std::vector<float> ddp = train(small_config(with(kBuckets, {"parallel.mode=ddp"})), world);
  for (const auto& [overlap, stage] : {std::pair{"interleaved", 1}, std::pair{"after_backward", 3}}) {
    const auto flat = with(kBuckets, hybrid(overlap, stage, 0));
    const auto whole = with(kBuckets, hybrid(overlap, stage, world.size));
    INFO("world " << world.size << ": " << describe(whole));
    CHECK(bitwise_equal(train(small_config(whole), world), train(small_config(flat), world)));
  }
  // G = 1: every rank its own group; the "reduce-scatter" of one rank leaves its gradient, and
  // the replicas' all-reduce is ddp's (on a padded bucket), so only the tolerance holds.
  for (const auto& [overlap, stage] : {std::pair{"interleaved", 1}, std::pair{"none", 2}}) {
    const auto one = with(kBuckets, hybrid(overlap, stage, 1));
    INFO("world " << world.size << ": " << describe(one));
    check_matches(train(small_config(one), world), ddp, false, false);
  }
}

TEST_CASE("hybrid sharding clips with one global norm every rank agrees on", "[hybrid]") {
  const World world = world_of(MPI_COMM_WORLD);
  const auto clip = with(kBuckets, {"optimizer.kind=sgd", "optimizer.lr=0.5",
                                    "train.clip_grad_norm=0.05"});
  Trainer ddp(small_config(with(clip, {"parallel.mode=ddp"})), world, quiet_options());
  train_checking_identity(ddp, 10);
  CHECK(ddp.last_grad_norm() > 0.05);  // the clip is active
  for (const auto& [overlap, stage] : {std::pair{"none", 1}, std::pair{"after_backward", 3}}) {
    INFO("overlap " << overlap << ", stage " << stage);
    Trainer trainer(small_config(with(clip, hybrid(overlap, stage, 2))), world, quiet_options());
    train_checking_identity(trainer, 10);
    CHECK(tolerance_ratio(named_parameters(trainer), named_parameters(ddp), 1e-5, 1e-6) <= 1.0);
    CHECK(trainer.last_grad_norm() == Approx(ddp.last_grad_norm()).epsilon(1e-6));
    // Bitwise the same norm on every rank: the verdict's all-reduce spans every rank.
    std::vector<float> norm = {static_cast<float>(trainer.last_grad_norm())};
    CHECK(identical_on_all_ranks(norm, world.comm));
  }
}

TEST_CASE("hybrid sharding on a two-tier modelled link trains the same bits", "[hybrid]") {
  // 2 modelled nodes of 2: the shard groups inside a node, the replicas across. The link only
  // delays completions, through every one of the four communicators.
  const World world = world_of(MPI_COMM_WORLD);
  const auto keys = with(kBuckets, hybrid("interleaved", 2, 2));
  const std::vector<float> plain = train(small_config(keys), world, 5);
  const std::vector<float> linked =
      train(small_config(with(keys, {"link.bandwidth_gbps=10", "link.latency_us=50",
                                     "link.node_ranks=2", "link.intra_gbps=100"})),
            world, 5);
  CHECK(bitwise_equal(linked, plain));
}

TEST_CASE("hybrid sharding allocates what the plan prints: state / G plus the pool", "[hybrid]") {
  const World world = world_of(MPI_COMM_WORLD);
  for (const auto& keys : std::vector<std::vector<std::string>>{
           {},
           {"parallel.zero_stage=2", "precision.compute=bf16", "precision.reduce_dtype=bf16"},
           {"parallel.zero_stage=3", "precision.compute=bf16",
            "precision.master_weights=remainders", "precision.reduce_dtype=bf16"}}) {
    const Config config = small_config(with(with(kBuckets, hybrid("interleaved", 1, 2)), keys));
    INFO(describe(keys));
    Trainer trainer(config, world, quiet_options());
    const ModePlan& mode = trainer.mode_plan();
    CHECK(mode.replicas == 2);
    const PlannedLayout planned = plan_layout(config.model, config.parallel, mode, 2);
    CHECK(planned.layout.total_numel() == trainer.model().store().total_numel());
    check_allocations_equal(trainer.allocated_memory(),
                            estimate_rank_memory(config, planned.layout, planned.plan, mode,
                                                 world.rank));
    // The optimizer state is a group's share: half of the padded model per rank (two groups of
    // two on four ranks), as a flat run of 2 ranks keeps.
    CHECK(trainer.optimizer().state_bytes() * 2 ==
          planned.layout.total_numel() * mode.state_floats_per_element * 4);
  }
}

TEST_CASE("a hybrid stage-3 checkpoint goes to 3 ranks flat, to 1 rank ddp, and back",
          "[hybrid-checkpoint]") {
  // 4 ranks in 2 groups at stage 3 write step 5; 3 ranks flat at stage 1 load it and write it
  // again; 1 rank in ddp loads that and writes it again; 4 ranks in 2 groups load that and train
  // to step 10: bitwise the uninterrupted run (parameters and optimizer state went through every
  // layout). The 3- and 1-rank runs use sub-communicators of this job.
  const World world = world_of(MPI_COMM_WORLD);
  REQUIRE(world.size == 4);
  const std::string dir = shared_dir(world.comm, "hybrid_checkpoint");
  // The same 24 samples per step at 4, 3 and 1 ranks (data.global_batch_size), so the sampler
  // position goes through every world size unchanged.
  const auto config = [&](const std::vector<std::string>& mode, const World& w) {
    Config c = small_config(with(with(kBuckets, mode),
                                 {"train.steps=10", "data.global_batch_size=24"}));
    apply_global_batch(c, w.size);
    return c;
  };
  const auto hsdp3 = hybrid("interleaved", 3, 2);
  std::vector<float> at5, at10;
  {
    Trainer trainer(config(hsdp3, world), world, quiet_options());
    train_checking_identity(trainer, 5);
    write_checkpoint(trainer.state(), dir + "/four.safetensors");
    at5 = named_parameters(trainer);
    train_checking_identity(trainer, 5);
    at10 = named_parameters(trainer);
  }
  // Loads `from` into `mode` on `w`, checks the parameters, writes `to`.
  const auto pass_on = [&](const std::vector<std::string>& mode, const World& w,
                           const std::string& from, const std::string& to) {
    Trainer trainer(config(mode, w), w, quiet_options());
    load_checkpoint(trainer.state(), dir + "/" + from);
    CHECK(trainer.step() == 5);
    CHECK(bitwise_equal(named_parameters(trainer), at5));
    write_checkpoint(trainer.state(), dir + "/" + to);
  };
  MPI_Comm three = MPI_COMM_NULL, one = MPI_COMM_NULL;
  MPI_Comm_split(world.comm, world.rank < 3 ? 0 : MPI_UNDEFINED, world.rank, &three);
  if (three != MPI_COMM_NULL) {
    pass_on(hybrid("none", 1, 0), world_of(three), "four.safetensors", "three.safetensors");
    MPI_Comm_free(&three);
  }
  MPI_Comm_split(world.comm, world.rank < 1 ? 0 : MPI_UNDEFINED, world.rank, &one);
  if (one != MPI_COMM_NULL) {
    pass_on({"parallel.mode=ddp"}, world_of(one), "three.safetensors", "one.safetensors");
    MPI_Comm_free(&one);
  }
  MPI_Barrier(world.comm);
  Trainer back(config(hsdp3, world), world, quiet_options());
  load_checkpoint(back.state(), dir + "/one.safetensors");
  train_checking_identity(back, 5);
  CHECK(bitwise_equal(named_parameters(back), at10));
}

TEST_CASE("a hybrid sharded checkpoint: every rank writes a part, the load equals the single file's",
          "[hybrid-checkpoint]") {
  const World world = world_of(MPI_COMM_WORLD);
  REQUIRE(world.size == 4);
  const std::string dir = shared_dir(world.comm, "hybrid_sharded");
  const std::string single = dir + "/single.safetensors";
  Config config = small_config(with(kBuckets, with(hybrid("interleaved", 3, 2),
                                                   {"checkpoint.format=sharded"})));
  config.checkpoint.dir = dir + "/sharded";
  {
    Trainer trainer(config, world, quiet_options());
    train_checking_identity(trainer, 4);
    write_checkpoint(trainer.state(), single);
    CheckpointSaver saver(config, world);
    saver.save(trainer.state());
    saver.finish();
  }
  // The replicas of a shard split it: each of the 4 files holds a part of the model.
  if (world.is_root()) {
    const Manifest m = read_manifest(config.checkpoint.dir + "/step_00000004/manifest.json");
    REQUIRE(m.shards.size() == 4);
    for (const ShardEntry& e : m.shards) CHECK_FALSE(e.pieces.empty());
  }
  // Into 2 groups of 2 again and into 3 ranks flat: the same bits as from the single file.
  const auto loads_alike = [&](const Config& c, const World& w) {
    Trainer a(c, w, quiet_options()), b(c, w, quiet_options());
    load_checkpoint(a.state(), single);
    load_checkpoint(b.state(), w.is_root() ? config.checkpoint.dir + "/step_00000004" : "");
    CHECK(b.step() == 4);
    CHECK(bitwise_equal(train_checking_identity(a, 2), train_checking_identity(b, 2)));
  };
  loads_alike(config, world);
  MPI_Comm three = MPI_COMM_NULL;
  MPI_Comm_split(world.comm, world.rank < 3 ? 0 : MPI_UNDEFINED, world.rank, &three);
  if (three != MPI_COMM_NULL) {
    loads_alike(small_config(with(kBuckets, hybrid("none", 1, 0))), world_of(three));
    MPI_Comm_free(&three);
  }
  MPI_Barrier(world.comm);
}

TEST_CASE("a shard group that does not divide the world is exit 2 naming both", "[hybrid-edges]") {
  const World world = world_of(MPI_COMM_WORLD);
  if (world.size != 3) return;
  const Config config = small_config(with(kBuckets, hybrid("none", 1, 2)));
  try {
    Trainer trainer(config, world, quiet_options());
    FAIL("a shard group of 2 on 3 ranks trained");
  } catch (const ReportedUserError&) {
    SUCCEED("every rank refused it");
  }
  try {
    check_shard_group(config, 3);
    FAIL("accepted");
  } catch (const UserError& e) {
    const std::string what = e.what();
    CHECK(what.find("parallel.shard_group = 2") != std::string::npos);
    CHECK(what.find("3 ranks") != std::string::npos);
  }
}
