// ZeRO with element shards (parallel.collective = "reduce_scatter_allgather", docs/design.md
// "Element shards"): every overlap in fp32 and bf16 (fp32 masters and remainders), with and
// without gradient accumulation, matches ddp after 20 steps with every rank holding
// bitwise-identical parameters after every step; a bucket with fewer elements than ranks; clipping
// through each rank's shard sum of squares; the allocations equal the plan's figures; and
// checkpoints hold full tensors that resume into any mode, world size and precision. Each at
// ZeRO stage 1 and 2 (parallel.zero_stage; Note [Gradient pool]).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "models/model.h"
#include "mpi_test_util.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/files/safetensors.h"
#include "runtime/train/plan/memory_estimate.h"
#include "runtime/train/plan/shard_layout.h"

using namespace zl;
using namespace zl::test;

namespace {

constexpr int kSteps = 20;

// A few buckets of a module or two each.
const std::vector<std::string> kBuckets = {"parallel.bucket_cap_mb=0.004",
                                           "parallel.first_bucket_cap_mb=0.001"};

// parallel.zero_stage = `stage`: 2 keeps only the gradient shard (Note [Gradient pool]).
std::vector<std::string> shards(const char* overlap, int stage = 1) {
  return {"parallel.mode=zero", std::string("parallel.overlap=") + overlap,
          "parallel.collective=reduce_scatter_allgather",
          fmt::format("parallel.zero_stage={}", stage)};
}

// Trains `steps` steps checking after each that every rank holds bitwise the same parameters
// (padding included), and that the padding is still zero; returns the named parameters.
std::vector<float> train(const Config& config, const World& world, int steps = kSteps) {
  Trainer trainer(config, world, quiet_options());
  train_checking_identity(trainer, steps);
  const std::vector<float> flat = parameters_of(trainer);
  std::vector<char> parameter(flat.size(), 0);
  for (const ParameterInfo& p : trainer.model().store().parameters()) {
    std::fill(parameter.begin() + p.offset, parameter.begin() + p.offset + p.numel, 1);
  }
  std::int64_t nonzero_padding = 0;
  for (std::size_t i = 0; i < flat.size(); ++i) nonzero_padding += !parameter[i] && flat[i] != 0.0f;
  CHECK(nonzero_padding == 0);
  return named_parameters(trainer);
}

// The tolerance: the shard's sum is the reduce-scatter's, ddp's the all-reduce's. On 1 or 2
// ranks both add the same two terms (a + b = b + a), so the runs are bitwise ddp's; on 3 or 4
// ranks MPI may associate the sums differently, so one gradient element may differ by an fp32 ulp
// (rtol 1e-5, atol 1e-6 after 20 steps covers that drift: invariant 3). In bf16 such an ulp can
// flip a parameter's rounding to bf16 (2^-8 relative), and the runs drift by bf16 noise from
// there: 4 bf16 ulps (rtol 2^-6) plus 2e-3 absolute (a fifth of one Adam step at lr 0.01), as the
// bucket modes' bf16 tests allow. A broken step (a stale shard, a missing all-gather, padding in
// a norm) is off by whole steps.
// Stage 2 with grad_accum > 1 reduce-scatters every micro-batch and adds the sums in the shard,
// ddp adds the micro-batches locally and all-reduces once: another association at every world
// size (1 rank too: the GEMM's beta = 1 sum against an add), so only the tolerance holds, and
// with a bf16 wire (RoundedPerMicroBatch) each micro-batch's sum is rounded to bf16, three
// roundings per step where ddp rounds the total once: up to three times the gradient noise, so
// twice the bf16 tolerance (rtol 2^-5, atol 4e-3, still under half an Adam step). With
// grad_accum = 1 the shard is the reduce-scatter's sum itself, as in stage 1.
enum class Association { SameAsDdp, Different, RoundedPerMicroBatch };
void check_matches(const std::vector<float>& got, const std::vector<float>& ddp, int world,
                   bool bf16, Association association = Association::SameAsDdp) {
  if (world <= 2 && association == Association::SameAsDdp) {
    CHECK(bitwise_equal(got, ddp));
    return;
  }
  const double worst =
      worst_against_ddp(got, ddp, bf16, association == Association::RoundedPerMicroBatch);
  INFO("worst |shards - ddp| / tolerance = " << worst);
  CHECK(worst <= 1.0);
}

}  // namespace

TEST_CASE("element shards match ddp in every overlap and precision, ranks bitwise identical",
          "[shards]") {
  const World world = world_of(MPI_COMM_WORLD);
  for (const Precision& precision : kPrecisions) {
    for (const char* accum : {"1", "3"}) {
      const auto base = with(with(kBuckets, precision.keys),
                             {std::string("train.grad_accum=") + accum});
      const std::vector<float> ddp = train(small_config(with(base, {"parallel.mode=ddp"})), world);
      for (const char* overlap : {"none", "after_backward", "interleaved"}) {
        for (const int stage : {1, 2}) {
          const auto overrides = with(base, shards(overlap, stage));
          INFO("world " << world.size << ": " << precision.name << ", " << describe(overrides));
          const bool per_micro_batch = stage == 2 && std::string(accum) != "1";
          const Association association =
              !per_micro_batch     ? Association::SameAsDdp
              : precision.bf16_wire ? Association::RoundedPerMicroBatch
                                    : Association::Different;
          const std::vector<float> got = train(small_config(overrides), world);
          check_matches(got, ddp, world.size, precision.bf16, association);
          if (stage != 2) continue;
          // Stage 3 reduces its gradients as stage 2 (the pool, per micro-batch with grad_accum)
          // and steps the same shards, and forward and backward read the gathered bits of those
          // shards: bitwise stage 2 at every world size.
          for (const char* reshard : {"true", "false"}) {
            const auto stage3 = with(overrides, {"parallel.zero_stage=3",
                                                 std::string("parallel.reshard_after_forward=") +
                                                     reshard});
            INFO(describe(stage3));
            CHECK(bitwise_equal(train(small_config(stage3), world), got));
          }
        }
      }
    }
  }
}

TEST_CASE("a bucket with fewer elements than ranks: ranks owning only padding", "[shards]") {
  const World world = world_of(MPI_COMM_WORLD);
  // layers.2 maps 1 unit to 1: a bucket of 2 elements (a tiny cap: a bucket per module), so on 3
  // and 4 ranks some ranks' shard of it is padding only.
  const std::vector<std::string> tiny = {"model.widths=[8, 16, 1, 1, 4]",
                                         "parallel.bucket_cap_mb=1e-9",
                                         "parallel.first_bucket_cap_mb=1e-9"};
  const std::vector<float> ddp = train(small_config(with(tiny, {"parallel.mode=ddp"})), world);
  for (const char* overlap : {"none", "interleaved"}) {
    for (const int stage : {1, 2}) {
      INFO("world " << world.size << ", overlap " << overlap << ", stage " << stage);
      check_matches(train(small_config(with(tiny, shards(overlap, stage))), world), ddp,
                    world.size, false);
    }
  }
}

TEST_CASE("clipping through each rank's shard sum of squares equals ddp's clipped run",
          "[shards]") {
  const World world = world_of(MPI_COMM_WORLD);
  const auto clip = with(kBuckets, {"optimizer.kind=sgd", "optimizer.lr=0.5",
                                    "train.clip_grad_norm=0.05"});
  Trainer ddp(small_config(with(clip, {"parallel.mode=ddp"})), world, quiet_options());
  train_checking_identity(ddp, 10);
  const std::vector<float> reference = named_parameters(ddp);
  CHECK(ddp.last_grad_norm() > 0.05);  // the clip is active
  for (const auto& [overlap, stage] : {std::pair{"none", 1}, std::pair{"after_backward", 1},
                                        std::pair{"none", 2}, std::pair{"after_backward", 2}}) {
    INFO("world " << world.size << ", overlap " << overlap << ", stage " << stage);
    Trainer trainer(small_config(with(clip, shards(overlap, stage))), world, quiet_options());
    train_checking_identity(trainer, 10);
    // The norm's partial sums are added per shard, then across ranks: another association than
    // ddp's, so the coefficient may differ in its last bits.
    CHECK(tolerance_ratio(named_parameters(trainer), reference, 1e-5, 1e-6) <= 1.0);
    CHECK(trainer.last_grad_norm() == Approx(ddp.last_grad_norm()).epsilon(1e-6));
  }
}

TEST_CASE("element shards allocate what the plan prints for them", "[shards]") {
  const World world = world_of(MPI_COMM_WORLD);
  for (const auto& keys : std::vector<std::vector<std::string>>{
           {}, {"optimizer.kind=sgd", "optimizer.momentum=0.9"},
           {"precision.compute=bf16", "precision.reduce_dtype=bf16"},
           {"precision.compute=bf16", "precision.master_weights=remainders"},
           {"parallel.zero_stage=3"},
           {"parallel.zero_stage=3", "parallel.prefetch=2", "optimizer.kind=sgd",
            "optimizer.momentum=0.9"},
           {"parallel.zero_stage=3", "parallel.reshard_after_forward=false",
            "precision.compute=bf16", "precision.master_weights=remainders"},
           {"parallel.zero_stage=2"},
           {"parallel.zero_stage=2", "precision.compute=bf16", "precision.reduce_dtype=bf16"}}) {
    const Config config = small_config(with(with(kBuckets, shards("interleaved")), keys));
    INFO(describe(keys));
    Trainer trainer(config, world, quiet_options());
    const PlannedLayout planned =
        plan_layout(config.model, config.parallel, trainer.mode_plan(), world.size);
    CHECK(planned.layout.total_numel() == trainer.model().store().total_numel());
    const RankMemory want = estimate_rank_memory(config, planned.layout, planned.plan,
                                                     trainer.mode_plan(), world.rank);
    const RankMemory got = trainer.allocated_memory();
    check_allocations_equal(got, want);
    const RankMemory planned_memory = rank_memory(trainer.mode_plan(), planned.plan,
                                                  planned.layout.total_numel(), world.rank);
    CHECK(got.gradient_pool == planned_memory.gradient_pool);
    if (config.parallel.zero_stage == 2) {
      // No full gradient buffer: the shard (padded total / world, fp32) and the pool.
      CHECK(trainer.model().store().grad_bytes() == 0);
      CHECK(got.gradient_pool > 0);
      CHECK((got.gradients - got.gradient_pool) * world.size ==
            trainer.model().store().total_numel() * 4);
    }
    // Invariant 5, exact: the state is the padded total / world.
    const int floats = config.optimizer.kind == OptimizerKind::Sgd ? 1 : 2;
    CHECK(got.state * world.size == trainer.model().store().total_numel() * floats * 4);
    if (trainer.mode_plan().gathers_parameters()) {
      // Stage 3: no flat parameters; the shards are the padded total / world, plus the buffers.
      CHECK(trainer.model().store().param_bytes() == 0);
      const std::int64_t size = dtype_size(trainer.mode_plan().param_dtype);
      CHECK((got.parameters - trainer.parameter_gather()->gather_bytes()) * world.size ==
            trainer.model().store().total_numel() * size);
      CHECK(trainer.parameter_gather()->gather_bytes() ==
            trainer.mode_plan().gather_buffers(trainer.plan()) *
                trainer.plan().largest_bucket_numel() * size);
    }
  }
}

namespace {

// Stage 3's gather events of the main thread, in order (steps and reduce-scatters, which
// interleaved records from the reduce thread, are left out).
struct GatherLog final : StepObserver {
  std::vector<StepEvent> events;
  void on_step_event(const StepEvent& e) override {
    if (e.kind == StepEvent::Kind::GatherIssued || e.kind == StepEvent::Kind::GatherDone ||
        e.kind == StepEvent::Kind::GatherReleased || e.kind == StepEvent::Kind::ParameterRead) {
      events.push_back(e);
    }
  }
};

}  // namespace

TEST_CASE("stage 3 gathers a bucket before its layers read it, prefetch buckets ahead",
          "[shards]") {
  const World world = world_of(MPI_COMM_WORLD);
  for (const char* prefetch : {"0", "1", "2"}) {
    for (const char* reshard : {"true", "false"}) {
      const Config config = small_config(with(with(kBuckets, shards("interleaved")),
                                              {"parallel.zero_stage=3", "train.grad_accum=2",
                                               std::string("parallel.prefetch=") + prefetch,
                                               std::string("parallel.reshard_after_forward=") +
                                                   reshard}));
      INFO("prefetch " << prefetch << ", reshard_after_forward " << reshard);
      Trainer trainer(config, world, quiet_options());
      const int buckets = static_cast<int>(trainer.plan().buckets.size());
      REQUIRE(buckets >= 3);
      GatherLog log;
      trainer.set_step_observer(&log);
      trainer.train_step();
      trainer.train_step();
      trainer.synchronize();
      trainer.set_step_observer(nullptr);
      enum class State { Free, Issued, Done };
      std::vector<State> state(static_cast<std::size_t>(buckets), State::Free);
      int reads = 0, issued = 0, prefetched = 0;
      for (const StepEvent& e : log.events) {
        auto& s = state[static_cast<std::size_t>(e.bucket)];
        switch (e.kind) {
          case StepEvent::Kind::GatherIssued:
            REQUIRE(s == State::Free);
            s = State::Issued;
            ++issued;
            break;
          case StepEvent::Kind::GatherDone: {
            REQUIRE(s == State::Issued);
            s = State::Done;
            // Outstanding beyond the one waited: at most `prefetch`.
            const auto outstanding = std::count(state.begin(), state.end(), State::Issued);
            CHECK(outstanding <= std::stoi(prefetch));
            prefetched += outstanding > 0;
            break;
          }
          case StepEvent::Kind::GatherReleased: s = State::Free; break;
          case StepEvent::Kind::ParameterRead:
            // The gather completed (the CPU waits on the host) and is still resident.
            CHECK(s == State::Done);
            ++reads;
            break;
          default: break;
        }
      }
      CHECK(reads > 0);
      if (std::string(prefetch) != "0") {
        CHECK(prefetched > 0);
      } else {
        CHECK(prefetched == 0);
      }
      // Every gather buffer is back between steps. 2 steps x 2 micro-batches: forward gathers
      // every bucket once each but the last in the second micro-batch (kept from the first's
      // backward); without reshard_after_forward backward finds them all resident, with it
      // backward gathers again the buckets it reads but bucket 0 (kept from forward): those
      // with Bucket::read_in_backward, as collective_program counts, whatever the prefetch.
      for (State s : state) CHECK(s == State::Free);
      if (std::string(reshard) == "false") {
        CHECK(issued == 2 * (2 * buckets - 1));
      } else {
        CHECK(issued > 2 * (2 * buckets - 1));
        CHECK(issued < 8 * buckets);
      }
      const auto planned = collective_program(trainer.mode_plan(), trainer.plan());
      CHECK(issued == 2 * std::count_if(planned.begin(), planned.end(),
                                        [](const ProgramEntry& c) {
                                          return c.op == CollectiveOp::AllGather;
                                        }));
    }
  }
}

TEST_CASE("stage 2's backward waits for a pool buffer once per bucket, on the timeline",
          "[shards]") {
  // Every bucket's first gradient write of a backward takes its buffer (Note [Gradient pool]),
  // waiting (a "wait" span on the compute stream) until the buffer's last bucket was
  // reduce-scattered. overlap = none has no forward waits, so every wait span is the pool's.
  const World world = world_of(MPI_COMM_WORLD);
  Trainer trainer(small_config(with(kBuckets, shards("none", 2))), world, quiet_options());
  REQUIRE(trainer.plan().buckets.size() >= 3);  // buckets reuse the two buffers
  trainer.train_step();
  trainer.tracer().timeline().start(trainer.compute_context());
  train_checking_identity(trainer, 2);
  trainer.tracer().timeline().stop();
  std::vector<int> waits(trainer.plan().buckets.size(), 0);
  for (const TimelineSpan& span : trainer.tracer().timeline().spans()) {
    if (span.name != "wait") continue;
    CHECK(span.stream == "compute");
    REQUIRE(span.bucket >= 0);
    ++waits[static_cast<std::size_t>(span.bucket)];
  }
  for (const int n : waits) CHECK(n == 2);  // one per bucket and backward
}

TEST_CASE("a stage-2 checkpoint resumes bitwise into stages 1, 2 and 3, a stage-3 one into stage "
          "2, and the stage-2 one into bucket modes and ddp on fewer ranks",
          "[shards]") {
  // W ranks at stage 2 write at step 4. Stages 1, 2 and 3 with grad_accum = 1 reduce the same
  // sums, so each resumes it bitwise into the stage-2 run's step 8, and a stage-3 run's file of
  // step 4 resumes into stage 2 the same way; W - 1 ranks with bucket ownership and 1 rank in ddp
  // load the full tensors (state bitwise for every parameter they step whole).
  const World world = world_of(MPI_COMM_WORLD);
  const std::string dir = shared_dir(world.comm, "stage2_checkpoint");
  const std::string path = dir + "/step4.safetensors";
  const auto base = with(kBuckets, {"data.train_samples=96", "train.steps=8"});
  const Config stage2 = small_config(with(base, shards("after_backward", 2)));
  std::vector<float> at4, at8;
  {
    Trainer first(stage2, world, quiet_options());
    train_checking_identity(first, 4);
    write_checkpoint(first.state(), path);
    at4 = named_parameters(first);
    train_checking_identity(first, 4);
    at8 = parameters_of(first);
  }
  const std::string stage3_path = dir + "/stage3_step4.safetensors";
  {
    Trainer three(small_config(with(base, shards("interleaved", 3))), world, quiet_options());
    train_checking_identity(three, 4);
    write_checkpoint(three.state(), stage3_path);
  }
  const std::vector<std::pair<int, std::string>> resumes{
      {2, path}, {1, path}, {3, path}, {2, stage3_path}};
  for (const auto& [stage, file] : resumes) {
    INFO("resumed at stage " << stage << " from " << file);
    const char* overlap = stage == 1 ? "none" : stage == 2 ? "interleaved" : "after_backward";
    auto keys = with(base, shards(overlap, stage));
    if (stage == 3) keys.push_back("parallel.reshard_after_forward=false");
    Trainer resumed(small_config(keys), world, quiet_options());
    load_checkpoint(resumed.state(), file);
    train_checking_identity(resumed, 4);
    CHECK(bitwise_equal(parameters_of(resumed), at8));
  }
  const auto resume_on = [&](int ranks, const Config& config) {
    MPI_Comm sub = MPI_COMM_NULL;
    MPI_Comm_split(world.comm, world.rank < ranks ? 0 : MPI_UNDEFINED, world.rank, &sub);
    if (sub != MPI_COMM_NULL) {
      INFO(ranks << " ranks, " << to_string(config.parallel.mode));
      Trainer resumed(config, world_of(sub), quiet_options());
      load_checkpoint(resumed.state(), path);
      CHECK(resumed.step() == 4);
      CHECK(bitwise_equal(named_parameters(resumed), at4));
      const SafetensorsReader file(path);
      const ParameterStore& store = resumed.model().store();
      std::vector<float> want;
      int compared = 0;
      for (int id = 0; id < store.count(); ++id) {
        const float* mine = resumed.optimizer().param_state(id, 1);
        if (mine == nullptr) continue;
        want.resize(static_cast<std::size_t>(store.info(id).numel));
        file.read_f32(fmt::format("optimizer.{}.exp_avg_sq", store.info(id).name),
                      store.info(id).shape, want.data());
        CHECK(std::memcmp(want.data(), mine, want.size() * sizeof(float)) == 0);
        ++compared;
      }
      CHECK(compared > 0);
      train_checking_identity(resumed, 2);
      MPI_Comm_free(&sub);
    }
    MPI_Barrier(world.comm);
  };
  if (world.size > 1) {
    resume_on(world.size - 1, small_config(with(base, {"parallel.mode=zero",
                                                       "parallel.collective=reduce_broadcast"})));
  }
  resume_on(1, small_config(with(base, {"parallel.mode=ddp"})));
}

TEST_CASE("a sharded checkpoint holds full tensors and resumes into any mode, world and "
          "precision",
          "[shards-checkpoint]") {
  // Run on 3 ranks: the 3-rank sharded run writes at step 4; the same run resumes bitwise; a
  // 2-rank bucket run, a 1-rank ddp run, a 3-rank bf16 run and a 2-rank sharded run resume it.
  const World world = world_of(MPI_COMM_WORLD);
  REQUIRE(world.size == 3);
  const std::string dir = shared_dir(world.comm, "shards_checkpoint");
  const std::string path = dir + "/step4.safetensors";
  const auto base = with(kBuckets, {"data.train_samples=96", "train.steps=10",
                                    "optimizer.schedule=cosine", "optimizer.warmup_steps=3"});
  const Config sharded = small_config(with(base, shards("interleaved")));
  std::vector<float> at4, at10_named;
  std::vector<float> at10_flat;
  {
    Trainer first(sharded, world, quiet_options());
    while (first.step() < 4) first.train_step();
    write_checkpoint(first.state(), path);
    at4 = named_parameters(first);
    while (first.step() < 10) first.train_step();
    at10_flat = parameters_of(first);
    at10_named = named_parameters(first);
  }
  // The file: every parameter's full fp32 tensor by name, every state tensor, no padding.
  {
    const SafetensorsReader file(path);
    CHECK_NOTHROW(file.verify_checksums());
    const ParameterStore layout = Model::parameter_layout(sharded.model);
    std::vector<float> got;
    std::size_t at = 0;
    for (const ParameterInfo& p : layout.parameters()) {
      got.resize(static_cast<std::size_t>(p.numel));
      file.read_f32(p.name, p.shape, got.data());
      CHECK(std::memcmp(got.data(), at4.data() + at, got.size() * sizeof(float)) == 0);
      at += got.size();
      for (const char* s : {"exp_avg", "exp_avg_sq"}) {
        file.read_f32(fmt::format("optimizer.{}.{}", p.name, s), p.shape, got.data());
        bool any = false;
        for (float x : got) any = any || x != 0.0f;
        CHECK(any);  // gathered from whichever ranks' shards hold it
      }
    }
  }
  // The same run resumes bitwise: parameters, padding, state, step count.
  {
    Trainer resumed(sharded, world, quiet_options());
    load_checkpoint(resumed.state(), path);
    while (resumed.step() < 10) resumed.train_step();
    CHECK(bitwise_equal(parameters_of(resumed), at10_flat));
  }
  // Other modes, world sizes and precisions load the full tensors: the parameters are the
  // file's (bf16: rounded to bf16), the state of every parameter a rank steps whole is the file's
  // bit for bit, and the run goes on with identical ranks; on 3 ranks in fp32 it continues the
  // sharded run (within check_matches's tolerance; another world size changes the global
  // batch and with it the sample order).
  std::string source = path;  // the checkpoint resume_on loads
  const auto resume_on = [&](int ranks, const Config& config) {
    MPI_Comm sub = MPI_COMM_NULL;
    MPI_Comm_split(world.comm, world.rank < ranks ? 0 : MPI_UNDEFINED, world.rank, &sub);
    if (sub != MPI_COMM_NULL) {
      const World part = world_of(sub);
      INFO(ranks << " ranks: " << describe(config.parallel.mode == ParallelMode::Ddp
                                               ? std::vector<std::string>{"ddp"}
                                               : std::vector<std::string>{
                                                     to_string(config.parallel.collective),
                                                     to_string(config.precision.compute)}));
      Trainer resumed(config, part, quiet_options());
      load_checkpoint(resumed.state(), source);
      CHECK(resumed.step() == 4);
      const bool bf16 = config.precision.compute == ComputePrecision::Bf16;
      const std::vector<float> loaded = named_parameters(resumed);
      if (bf16) {
        CHECK(tolerance_ratio(loaded, at4, 1.0 / 256.0, 0.0) <= 1.0);  // one bf16 rounding
      } else {
        CHECK(bitwise_equal(loaded, at4));
      }
      const SafetensorsReader file(source);
      const ParameterStore& store = resumed.model().store();
      std::vector<float> want;
      for (int id = 0; id < store.count(); ++id) {
        for (int s = 0; s < 2; ++s) {
          const float* mine = resumed.optimizer().param_state(id, s);
          if (mine == nullptr) continue;
          want.resize(static_cast<std::size_t>(store.info(id).numel));
          file.read_f32(fmt::format("optimizer.{}.{}", store.info(id).name,
                                    resumed.optimizer().state_names()[s]),
                        store.info(id).shape, want.data());
          CHECK(std::memcmp(want.data(), mine, want.size() * sizeof(float)) == 0);
        }
      }
      train_checking_identity(resumed, 6);
      if (ranks == 3 && !bf16) {
        CHECK(tolerance_ratio(named_parameters(resumed), at10_named, 1e-5, 1e-6) <= 1.0);
      }
      MPI_Comm_free(&sub);
    }
    MPI_Barrier(world.comm);
  };
  resume_on(3, small_config(with(base, {"parallel.mode=ddp"})));
  resume_on(3, small_config(
                   with(base, {"parallel.mode=zero", "parallel.collective=reduce_broadcast"})));
  resume_on(3, small_config(with(with(base, shards("none")), {"precision.compute=bf16"})));
  resume_on(2, small_config(with(base, shards("after_backward"))));
  resume_on(1, small_config(with(base, {"parallel.mode=ddp"})));
  // Stage 3 (its parameters are shards too): it resumes stage 1's file on 3 ranks bitwise (stage
  // 3 is bitwise stage 1), writes the same tensors, and its file resumes elsewhere.
  const auto stage3 = [&](const char* overlap, std::vector<std::string> keys) {
    return small_config(with(with(with(base, shards(overlap)), {"parallel.zero_stage=3"}), keys));
  };
  {
    Trainer resumed(stage3("interleaved", {}), world, quiet_options());
    load_checkpoint(resumed.state(), path);
    while (resumed.step() < 10) resumed.train_step();
    CHECK(bitwise_equal(parameters_of(resumed), at10_flat));
  }
  const std::string stage3_path = dir + "/stage3_step4.safetensors";
  {
    Trainer three(stage3("interleaved", {}), world, quiet_options());
    while (three.step() < 4) three.train_step();
    write_checkpoint(three.state(), stage3_path);
  }
  if (world.is_root()) {
    const SafetensorsReader one_file(path), three_file(stage3_path);
    const ParameterStore layout = Model::parameter_layout(sharded.model);
    std::vector<float> a, b;
    for (const ParameterInfo& p : layout.parameters()) {
      for (const std::string& name : {p.name, fmt::format("optimizer.{}.exp_avg", p.name)}) {
        a.resize(static_cast<std::size_t>(p.numel));
        b.resize(a.size());
        one_file.read_f32(name, p.shape, a.data());
        three_file.read_f32(name, p.shape, b.data());
        CHECK(bitwise_equal(a, b));
      }
    }
  }
  resume_on(2, stage3("none", {"precision.compute=bf16"}));
  source = stage3_path;
  resume_on(1, small_config(with(base, {"parallel.mode=ddp"})));
  resume_on(3, stage3("after_backward", {"parallel.reshard_after_forward=false"}));
  source = path;

  // And the other way: a bucket-mode checkpoint resumes into element shards on 2 ranks, every
  // rank's shard of state taken from the full tensors, bitwise.
  const std::string bucket_path = dir + "/bucket_step4.safetensors";
  {
    Trainer bucket(small_config(with(base, {"parallel.mode=zero",
                                            "parallel.collective=reduce_broadcast"})),
                   world, quiet_options());
    while (bucket.step() < 4) bucket.train_step();
    write_checkpoint(bucket.state(), bucket_path);
  }
  MPI_Comm sub = MPI_COMM_NULL;
  MPI_Comm_split(world.comm, world.rank < 2 ? 0 : MPI_UNDEFINED, world.rank, &sub);
  if (sub != MPI_COMM_NULL) {
    Trainer resumed(small_config(with(base, shards("interleaved"))), world_of(sub),
                    quiet_options());
    load_checkpoint(resumed.state(), bucket_path);
    const SafetensorsReader file(bucket_path);
    const ParameterStore& store = resumed.model().store();
    RankOptimizer& opt = resumed.optimizer();
    std::vector<float> full;
    for (int id = 0; id < store.count(); ++id) {
      const ParameterInfo& p = store.info(id);
      const int b = resumed.plan().bucket_of_param[static_cast<std::size_t>(id)];
      const ElementRange& shard = opt.stepped(b);
      full.resize(static_cast<std::size_t>(p.numel));
      file.read_f32(fmt::format("optimizer.{}.exp_avg_sq", p.name), p.shape, full.data());
      // The part of the parameter inside this rank's shard.
      for (std::int64_t e = std::max(p.offset, shard.offset);
           e < std::min(p.offset + p.numel, shard.offset + shard.numel); ++e) {
        REQUIRE(*resumed.optimizer().state_at(b, 1, e) ==
                full[static_cast<std::size_t>(e - p.offset)]);
      }
    }
    train_checking_identity(resumed, 3);
    MPI_Comm_free(&sub);
  }
  MPI_Barrier(world.comm);
}

TEST_CASE("link.ranks = 8 makes each rank step the shard it would own among 8 ranks",
          "[shards]") {
  // A timing study (runtime/comm/link/shard_study.h): state, masters and the step are an 8-rank
  // job's share, the collectives the real world's; the ranks stay identical, and the figures are
  // the plan's. Not a training run: refused with a checkpoint directory. Stage 3 holds an eighth of
  // the parameters too, and its gathers are the real world's.
  const World world = world_of(MPI_COMM_WORLD);
  const Config config = small_config(with(with(kBuckets, shards("interleaved")),
                                          {"link.bandwidth_gbps=1000", "link.ranks=8"}));
  for (const int stage : {1, 3}) {
    INFO("stage " << stage);
    Config staged = config;
    staged.parallel.zero_stage = stage;
    Trainer trainer(staged, world, quiet_options());
    REQUIRE(trainer.plan().world_size == 8);
    const std::int64_t total = trainer.model().store().total_numel();
    CHECK(total % (16 * 8) == 0);
    CHECK(trainer.optimizer().state_bytes() * 8 == total * 2 * 4);  // Adam: an eighth of m and v
    const PlannedLayout planned =
        plan_layout(staged.model, staged.parallel, trainer.mode_plan(), 8);
    check_allocations_equal(trainer.allocated_memory(),
                            estimate_rank_memory(staged, planned.layout, planned.plan,
                                                 trainer.mode_plan(), world.rank));
    if (stage == 3) {
      const RankMemory held =
          rank_memory(trainer.mode_plan(), planned.plan, total, world.rank);
      CHECK(held.parameters - held.gather_buffers == total / 8 * 4);  // an eighth, fp32
    }
    train_checking_identity(trainer, 3);
    for (const float x : parameters_of(trainer)) REQUIRE(std::isfinite(x));
  }
  Config with_dir = config;
  with_dir.checkpoint.dir = shared_dir(world.comm, "shard_ranks");
  CHECK_THROWS_WITH(Trainer(with_dir, world, quiet_options()),
                    Catch::Contains("link.ranks = 8") && Catch::Contains("timing study"));
}

TEST_CASE("runtime.memory_limit_mb refuses a run above it naming what fits; 4 ranks at stage 3 "
          "train under it",
          "[shards]") {
  const World world = world_of(MPI_COMM_WORLD);
  if (world.size != 4) return;  // a 1-rank run against a 4-rank one
  // Parameters dominate (about 116k): ddp keeps 16 bytes of each per rank, stage 3 on 4 ranks
  // about 7 plus a few gather buffers.
  const std::vector<std::string> model = {"model.widths=[8, 128, 128, 128, 128, 128, 128, 128, 128, 4]", "data.eval_batch_size=16",
                                          "parallel.bucket_cap_mb=0.05",
                                          "parallel.first_bucket_cap_mb=0.01"};
  const auto peak = [](const Config& c, int ranks) {
    const ModePlan mode = make_run_mode_plan(c, ranks);
    const PlannedLayout planned = plan_layout(c.model, c.parallel, mode, ranks);
    return estimate_peak_rank_memory(c, planned.layout, planned.plan, mode).total();
  };
  const Config ddp = small_config(with(model, {"parallel.mode=ddp"}));
  const Config stage3 = small_config(with(with(model, shards("interleaved")),
                                          {"parallel.zero_stage=3"}));
  const std::int64_t one = peak(ddp, 1), four = peak(stage3, 4);
  REQUIRE(four * 3 < one * 2);
  const double limit_mb = static_cast<double>(one + four) / 2.0 / (1024.0 * 1024.0);
  const std::string limit = fmt::format("runtime.memory_limit_mb={}", limit_mb);
  MPI_Comm sub = MPI_COMM_NULL;
  MPI_Comm_split(world.comm, world.rank == 0 ? 0 : MPI_UNDEFINED, world.rank, &sub);
  if (sub != MPI_COMM_NULL) {
    // Refused at start-up on every rank of the run (ReportedUserError: exit 2 from the CLI).
    std::string what;
    try {
      Trainer refused(small_config(with(with(model, {"parallel.mode=ddp"}), {limit})),
                      world_of(sub), quiet_options());
    } catch (const ReportedUserError& e) {
      what = e.what();
    }
    {
      INFO(what);
      CHECK_THAT(what, Catch::Contains("runtime.memory_limit_mb") &&
                           Catch::Contains("the one rank needs") &&
                           Catch::Contains("parallel.zero_stage = 3") &&
                           Catch::Contains(" ranks with ") && Catch::Contains("on the largest rank)"));
    }
    MPI_Comm_free(&sub);
  }
  MPI_Barrier(world.comm);
  Trainer fits(small_config(with(with(with(model, shards("interleaved")),
                                      {"parallel.zero_stage=3"}),
                                 {limit})),
               world, quiet_options());
  CHECK(fits.allocated_memory().total() < static_cast<std::int64_t>(limit_mb * 1024 * 1024));
  train_checking_identity(fits, 2);
}
