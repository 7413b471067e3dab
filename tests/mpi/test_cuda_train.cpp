// Training on CUDA (cuBLAS, CUDA kernels, NCCL communicators, stream/event ordering) against the
// same run on the CPU, on one rank ([cuda-train]; [cuda-multi] on several ranks with a GPU each):
// every mode and collective, several buckets, gradient accumulation, clipping, a residual model;
// parameters, losses and evaluation within float tolerance after a few steps. A missing event
// wait shows up as a stale or half-written bucket, i.e. an error of the order of the learning
// rate, far above the tolerances. Built only with CUDA; where no GPU is visible each case skips
// with a printed reason.
#include <catch2/catch.hpp>

#include "cuda_test_util.h"

#if defined(ZEROLAP_WITH_CUDA)

#include <cuda_runtime.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "base/bf16.h"
#include "base/device_buffer.h"
#include "mpi_test_util.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/checkpoint_saver.h"
#include "runtime/checkpoint/files/shard_manifest.h"
#include "runtime/comm/backends/nccl_communicator.h"

using namespace zl;
using namespace zl::test;

namespace {

// The parameters as fp32 (bf16 ones widened, exactly).
std::vector<float> host_parameters(Trainer& trainer) {
  trainer.synchronize();
  // ZeRO stage 3 keeps shards only: gathered (a copy of the store's buffer reads past it).
  if (ParameterGather* gather = trainer.parameter_gather()) return gather->full_parameters();
  const auto& store = trainer.model().store();
  std::vector<float> out(static_cast<std::size_t>(store.total_numel()));
  if (store.param_dtype() == DType::BF16) {
    std::vector<Bf16> bits(out.size());
    copy_to_host(store.params_as<Bf16>(), store.device(), bits.data(), store.total_numel());
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = bf16_to_float(bits[i]);
    return out;
  }
  copy_to_host(store.data(), store.device(), out.data(), store.total_numel());
  return out;
}

struct Outcome {
  std::vector<float> params;
  std::vector<double> losses;
  EvalResult eval;
};

Outcome train(std::vector<std::string> overrides, const char* device, int steps) {
  overrides.push_back(std::string("runtime.device=") + device);
  Trainer trainer(small_config(overrides), world_of(MPI_COMM_SELF), quiet_options());
  REQUIRE(trainer.model().store().device() ==
          (std::string(device) == "cuda" ? DeviceKind::Cuda : DeviceKind::Cpu));
  Outcome o;
  for (int s = 0; s < steps; ++s) {
    trainer.train_step();
    o.losses.push_back(trainer.take_loss().loss_sum);
  }
  o.params = host_parameters(trainer);
  o.eval = trainer.evaluate();
  return o;
}

// `loss_rtol`: of the losses and the evaluation loss; `flips`: test samples whose argmax may
// differ (a borderline sample under a different summation order).
void check_cuda_matches_cpu(const std::vector<std::string>& overrides, double rtol, double atol,
                           double loss_rtol = 1e-4, int flips = 1) {
  constexpr int kSteps = 4;
  const Outcome cpu = train(overrides, "cpu", kSteps);
  const Outcome gpu = train(overrides, "cuda", kSteps);
  const double worst = tolerance_ratio(gpu.params, cpu.params, rtol, atol);
  INFO("worst |cuda - cpu| / (atol + rtol |cpu|) = " << worst);
  CHECK(worst <= 1.0);
  for (int s = 0; s < kSteps; ++s) {
    CHECK(gpu.losses[s] == Approx(cpu.losses[s]).epsilon(loss_rtol));
  }
  CHECK(gpu.eval.samples == cpu.eval.samples);
  CHECK(gpu.eval.loss == Approx(cpu.eval.loss).epsilon(loss_rtol));
  const double allowed = static_cast<double>(flips) / static_cast<double>(cpu.eval.samples);
  CHECK(std::fabs(gpu.eval.accuracy - cpu.eval.accuracy) <= allowed + 1e-12);
}

// Several buckets (a few parameters each), so per-bucket events and per-layer waits matter.
const std::vector<std::string> kBuckets = {"parallel.bucket_cap_mb=0.004",
                                           "parallel.first_bucket_cap_mb=0.001"};

// A section's name: every key of its case. Catch2 runs a DYNAMIC_SECTION whose name repeats at the
// same line only once, silently; each test REQUIREs its names unique (checked without a GPU too).
std::string section_name(const std::vector<std::string>& keys) {
  std::string name;
  for (const std::string& k : keys) name += (name.empty() ? "" : " ") + k;
  return name;
}
void require_unique_names(const std::vector<std::string>& names) {
  const std::set<std::string> unique(names.begin(), names.end());
  REQUIRE(unique.size() == names.size());
}

// Whether a GPU runs `cases`, each in a section named by its keys; the names are checked unique
// without a GPU too.
bool runs_sections(const std::vector<std::vector<std::string>>& cases) {
  std::vector<std::string> names;
  for (const auto& c : cases) names.push_back(section_name(c));
  require_unique_names(names);
  return cuda_device_visible();
}

// Each case (its keys appended to `base` and kBuckets) in a section of its own, CUDA against the
// CPU within check_cuda_matches_cpu's tolerances.
void check_each_case(const std::vector<std::string>& base,
                     const std::vector<std::vector<std::string>>& cases, double rtol, double atol,
                     double loss_rtol = 1e-4, int flips = 1) {
  if (!runs_sections(cases)) return;
  for (const auto& c : cases) {
    DYNAMIC_SECTION(section_name(c)) {
      check_cuda_matches_cpu(with(with(base, kBuckets), c), rtol, atol, loss_rtol, flips);
    }
  }
}

}  // namespace

TEST_CASE("one rank on CUDA trains like the CPU in every mode", "[cuda-train]") {
  std::vector<std::vector<std::string>> modes = {{"parallel.mode=ddp"}};
  for (const char* overlap : {"none", "after_backward", "interleaved"}) {
    for (const char* collective :
         {"allreduce_broadcast", "reduce_broadcast", "reduce_scatter_allgather"}) {
      modes.push_back({"parallel.mode=zero", std::string("parallel.overlap=") + overlap,
                       std::string("parallel.collective=") + collective});
    }
    // ZeRO stage 2: the gradient pool's stream waits and the shard's accumulation on the comm
    // stream (Note [Gradient pool]); the section is named by its last key, the overlap.
    modes.push_back({"parallel.mode=zero", "parallel.collective=reduce_scatter_allgather",
                     "parallel.zero_stage=2", std::string("parallel.overlap=") + overlap});
    // ZeRO stage 3: each bucket's gather copied and all-gathered on the device before its first
    // layer, its buffer reused only after the compute stream is done with it
    // (Note [Parameter gathers]).
    modes.push_back({"parallel.mode=zero", "parallel.collective=reduce_scatter_allgather",
                     "parallel.zero_stage=3", std::string("parallel.overlap=") + overlap});
  }
  // SGD with momentum is linear in the gradients: tight. Adam divides by sqrt(v), which magnifies
  // the relative error of small gradients: an absolute floor of 1e-4 at lr 0.01.
  const std::vector<std::pair<std::vector<std::string>, std::pair<double, double>>> optimizers = {
      {{"optimizer.kind=sgd", "optimizer.lr=0.1", "optimizer.momentum=0.9"}, {1e-4, 1e-6}},
      {{"optimizer.kind=adam", "optimizer.lr=0.01"}, {1e-4, 1e-4}},
  };
  std::vector<std::vector<std::string>> cases;
  for (const auto& mode : modes) {
    for (const auto& opt : optimizers) cases.push_back(with(mode, opt.first));
  }
  if (!runs_sections(cases)) return;
  for (const auto& mode : modes) {
    for (const auto& [opt, tol] : optimizers) {
      const auto overrides = with(with(mode, opt), kBuckets);
      DYNAMIC_SECTION(section_name(with(mode, opt))) {
        check_cuda_matches_cpu(overrides, tol.first, tol.second);
      }
    }
  }
}

TEST_CASE("CUDA matches the CPU with grad accumulation, clipping and a residual model",
          "[cuda-train]") {
  const std::vector<std::string> sgd = {"optimizer.kind=sgd", "optimizer.lr=0.1",
                                        "optimizer.momentum=0.9"};
  const std::vector<std::vector<std::string>> cases = {
      {"parallel.mode=zero", "parallel.overlap=interleaved", "train.grad_accum=3"},
      {"parallel.mode=zero", "parallel.overlap=interleaved",
       "parallel.collective=reduce_scatter_allgather", "parallel.zero_stage=2",
       "train.grad_accum=3"},
      // ZeRO stage 3 without resharding, clipped
      {"parallel.mode=zero", "parallel.overlap=after_backward",
       "parallel.collective=reduce_scatter_allgather", "parallel.zero_stage=3",
       "parallel.reshard_after_forward=false", "train.clip_grad_norm=0.05", "train.grad_accum=3"},
      {"parallel.mode=zero", "parallel.overlap=after_backward", "train.clip_grad_norm=0.05"},
      // residual_mlp (LayerNorm kernels)
      {"model.kind=residual_mlp", "model.widths=[8,32,32,32,4]", "parallel.mode=zero",
       "parallel.overlap=interleaved", "parallel.collective=reduce_broadcast"},
      // regression (teacher targets on the device)
      {"data.teacher_task=\"regression\""},
  };
  check_each_case(sgd, cases, 1e-4, 1e-6);
}

TEST_CASE("bf16 on CUDA trains like bf16 on the CPU in every mode, with fp32 masters or "
          "remainders and bf16 collectives",
          "[cuda-train]") {
  // cuBLAS and oneDNN accumulate the bf16 GEMMs in fp32 in different orders, so an activation
  // can round to the neighbouring bf16 value (2^-8 relative). SGD with momentum is linear in the
  // gradients, so after 4 steps at lr 0.1 a parameter moves by such a rounding times the steps:
  // 4 bf16 ulps relative (2^-6) plus 1e-3 absolute for weights near zero. Losses and the
  // evaluation see bf16 logits: 1e-2 relative, and 5 of the 256 test samples may flip their
  // argmax (bf16 logits of a borderline sample tie or cross). A missing wait (a stale bucket, a
  // half-written parameter) is off by whole updates of ~lr * |g|, far above these.
  const std::vector<std::string> sgd = {"optimizer.kind=sgd", "optimizer.lr=0.1",
                                        "optimizer.momentum=0.9", "precision.compute=bf16"};
  const std::vector<std::vector<std::string>> cases = {
      {"parallel.mode=ddp"},
      {"parallel.mode=zero", "parallel.overlap=none", "precision.master_weights=remainders"},
      {"parallel.mode=zero", "parallel.overlap=after_backward", "precision.reduce_dtype=bf16"},
      {"parallel.mode=zero", "parallel.overlap=interleaved", "parallel.collective=reduce_broadcast",
       "precision.reduce_dtype=bf16", "precision.master_weights=remainders"},
      {"parallel.mode=zero", "parallel.overlap=after_backward", "train.clip_grad_norm=0.05",
       "precision.reduce_dtype=bf16"},
      {"model.kind=residual_mlp", "model.widths=[8,32,32,32,4]", "parallel.mode=zero",
       "parallel.overlap=interleaved"},
      {"data.teacher_task=\"regression\"", "parallel.mode=zero", "parallel.overlap=interleaved"},
      {"parallel.mode=zero", "parallel.overlap=interleaved",
       "parallel.collective=reduce_scatter_allgather", "parallel.zero_stage=3",
       "precision.reduce_dtype=bf16", "precision.master_weights=remainders"},
      // Stage 2 on a bf16 wire over micro-batches: the pool's bf16 shard accumulated on the comm
      // stream after each reduce-scatter (Note [Gradient pool]).
      {"parallel.mode=zero", "parallel.overlap=interleaved",
       "parallel.collective=reduce_scatter_allgather", "parallel.zero_stage=2",
       "precision.reduce_dtype=bf16", "train.grad_accum=3"},
  };
  check_each_case(sgd, cases, 1.0 / 64.0, 1e-3, 1e-2, 5);
}

TEST_CASE("sharded checkpoints on CUDA: the sync write (from device memory, a buffer at a time) "
          "writes the async staging copy's bytes, and loads back bitwise",
          "[cuda-train]") {
  // fp32 values read from device memory; bf16 stage 3's masters assembled on the host.
  const std::vector<std::vector<std::string>> cases = {
      {"parallel.mode=zero", "parallel.collective=reduce_scatter_allgather"},
      {"parallel.mode=zero", "parallel.collective=reduce_scatter_allgather",
       "parallel.zero_stage=3", "precision.compute=bf16"}};
  if (!runs_sections(cases)) return;
  for (const auto& c : cases) {
    DYNAMIC_SECTION(section_name(c)) {
      const World world = world_of(MPI_COMM_SELF);
      const std::string dir = shared_dir(MPI_COMM_SELF, "cuda_sharded_checkpoint");
      Config sync_config = small_config(with(with(kBuckets, c),
                                             {"runtime.device=cuda", "checkpoint.format=sharded",
                                              "checkpoint.dir=\"" + dir + "/sync\""}));
      Config async_config = sync_config;
      async_config.checkpoint.dir = dir + "/async";
      async_config.checkpoint.async = true;
      Trainer trainer(sync_config, world, quiet_options());
      for (int s = 0; s < 3; ++s) trainer.train_step();
      trainer.synchronize();
      {
        CheckpointSaver sync(sync_config, world);
        sync.save(trainer.state());
        CheckpointSaver async(async_config, world);
        async.save(trainer.state());
        async.finish();
      }
      const std::string shard = "/step_00000003/" + shard_file_name(0, 1, 0);
      const std::string written = file_bytes(dir + "/sync" + shard);
      CHECK_FALSE(written.empty());
      CHECK(written == file_bytes(dir + "/async" + shard));
      Trainer loaded(sync_config, world, quiet_options());
      load_checkpoint(loaded.state(), dir + "/sync/step_00000003");
      CHECK(bitwise_equal(host_parameters(loaded), host_parameters(trainer)));
    }
  }
}

TEST_CASE("NCCL communicator on one rank: callbacks are stream-ordered, f64 sums land on the host",
          "[cuda-train]") {
  if (!cuda_device_visible()) return;
  const World world = world_of(MPI_COMM_SELF);
  const Device device(DeviceChoice::Cuda, world);
  NcclCommunicator reduce(world.comm, "comm.reduce", 30.0, device.compute());
  NcclCommunicator bcast(world.comm, "comm.broadcast", 30.0, device.compute());

  const std::vector<float> host = {1.0f, 2.0f, 3.0f, 4.0f};
  DeviceBuffer buf(DeviceKind::Cuda, 4);
  copy_from_host(host.data(), buf.data(), DeviceKind::Cuda, 4);
  reduce.all_reduce(buf.data(), 4, ReduceOp::Sum);
  // As interleaved ZeRO does: a kernel in the callback on the reduce stream, then a broadcast on
  // the other communicator that must follow it.
  Work step = reduce.then([&](const ExecContext& stream) { scale(stream, buf.data(), 4, 2.0f); });
  Work b;
  reduce.then([&](const ExecContext& stream) { b = bcast.broadcast(buf.data(), 4, 0, &stream); });
  b.stream_wait(device.compute());
  scale(device.compute(), buf.data(), 4, 10.0f);  // compute-stream work after the broadcast
  synchronize_stream(device.compute());
  CHECK(step.is_done());
  std::vector<float> out(4);
  copy_to_host(buf.data(), DeviceKind::Cuda, out.data(), 4);
  CHECK(out == std::vector<float>{20.0f, 40.0f, 60.0f, 80.0f});

  // Stage 3's gather: the rank's shard read from a buffer of its own.
  DeviceBuffer shard(DeviceKind::Cuda, 4), gathered(DeviceKind::Cuda, 4);
  copy_from_host(host.data(), shard.data(), DeviceKind::Cuda, 4);
  bcast.all_gather_from(shard.data(), gathered.data(), 4, DType::F32).wait();
  copy_to_host(gathered.data(), DeviceKind::Cuda, out.data(), 4);
  CHECK(out == host);

  std::vector<double> sums = {1.5, -2.25};
  reduce.all_reduce_f64(sums.data(), 2).wait();
  CHECK(sums == std::vector<double>{1.5, -2.25});
  CHECK(reduce.stats().ops == 2);
  CHECK(bcast.stats().ops == 2);
  reduce.synchronize();
  bcast.synchronize();
}

// Several ranks, each on a GPU of its own, so that NCCL moves bytes between GPUs: every case
// above runs on one rank, where a collective is a local copy. Flat element shards at stages 1-3
// and, on an even world, hybrid sharding (parallel.shard_group: the group's reduce-scatter, the
// replicas' all-reduce on its own communicator, the verdict on the world's), each against the
// same ranks on the CPU, with every rank bitwise identical after every CUDA step (docs/design.md
// invariant 2). Skips with a WARN unless every rank has a GPU of its own (Device's collective
// check: one GPU cannot hold two ranks of an NCCL communicator).
TEST_CASE("several ranks on CUDA (NCCL between GPUs) train like the same ranks on the CPU",
          "[cuda-multi]") {
  const World world = world_of(MPI_COMM_WORLD);
  try {
    const Device probe(DeviceChoice::Cuda, world, 60.0);
  } catch (const UserError& e) {
    WARN("no CUDA device visible to every rank on its own: skipping (" << e.what() << ")");
    return;
  }
  const std::vector<std::string> shards = {"parallel.mode=zero",
                                           "parallel.collective=reduce_scatter_allgather"};
  const std::vector<std::string> bf16 = {"precision.compute=bf16",
                                         "precision.master_weights=remainders",
                                         "precision.reduce_dtype=bf16"};
  std::vector<std::vector<std::string>> cases = {
      {"parallel.mode=ddp"},
      {"parallel.mode=zero", "parallel.overlap=interleaved",
       "parallel.collective=reduce_broadcast"},
      with(shards, {"parallel.overlap=interleaved", "parallel.zero_stage=1"}),
      with(shards, {"parallel.overlap=after_backward", "parallel.zero_stage=2",
                    "train.grad_accum=3"}),
      with(with(shards, {"parallel.overlap=interleaved", "parallel.zero_stage=3"}), bf16),
  };
  if (world.size % 2 == 0) {
    const std::string group = "parallel.shard_group=" + std::to_string(world.size / 2);
    cases.push_back(with(shards, {"parallel.overlap=interleaved", "parallel.zero_stage=1", group}));
    cases.push_back(with(shards, {"parallel.overlap=after_backward", "parallel.zero_stage=2",
                                  "train.grad_accum=3", group}));
    cases.push_back(
        with(with(shards, {"parallel.overlap=interleaved", "parallel.zero_stage=3", group}), bf16));
  }
  std::vector<std::string> names;
  for (const auto& c : cases) names.push_back(section_name(c));
  require_unique_names(names);
  constexpr int kSteps = 4;
  const auto run = [&](std::vector<std::string> overrides, const char* device) {
    overrides.push_back(std::string("runtime.device=") + device);
    Trainer trainer(small_config(with(kBuckets, overrides)), world, quiet_options());
    Outcome o;
    for (int s = 0; s < kSteps; ++s) {
      trainer.train_step();
      o.losses.push_back(trainer.take_loss().loss_sum);
      o.params = host_parameters(trainer);  // collective at stage 3 (a gather)
      if (std::string(device) == "cuda" && !identical_on_all_ranks(o.params, world.comm)) {
        FAIL_CHECK("ranks diverged on CUDA after step " << s + 1);
      }
    }
    o.eval = trainer.evaluate();
    return o;
  };
  for (const auto& c : cases) {
    DYNAMIC_SECTION(section_name(c)) {
      const bool is_bf16 = c.back() == bf16.back();
      const Outcome cpu = run(c, "cpu");
      const Outcome gpu = run(c, "cuda");
      // The one-rank tolerances (Adam; bf16 as the bf16 cases above): NCCL and MPI add the
      // ranks' gradients in different orders, which the one-rank cases never do.
      const double worst = is_bf16 ? tolerance_ratio(gpu.params, cpu.params, 1.0 / 64.0, 1e-3)
                                   : tolerance_ratio(gpu.params, cpu.params, 1e-4, 1e-4);
      INFO("worst |cuda - cpu| / (atol + rtol |cpu|) = " << worst);
      CHECK(worst <= 1.0);
      const double loss_rtol = is_bf16 ? 1e-2 : 1e-4;
      for (int s = 0; s < kSteps; ++s) {
        CHECK(gpu.losses[s] == Approx(cpu.losses[s]).epsilon(loss_rtol));
      }
      CHECK(gpu.eval.samples == cpu.eval.samples);
      CHECK(gpu.eval.loss == Approx(cpu.eval.loss).epsilon(loss_rtol));
    }
  }
}

#else

TEST_CASE("CUDA training tests are not built", "[cuda-train][cuda-multi]") {
  WARN("built without CUDA (ZEROLAP_CUDA=OFF or nvcc not found): CUDA training tests skipped");
}

#endif  // ZEROLAP_WITH_CUDA
