// TrainerSetup: device, agreement, data, the checks of what the run cannot do (trainable,
// collective counts, memory), model, communicators (trainer_setup.h).
#include "runtime/train/run/trainer_setup.h"

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

#include "base/errors.h"
#include "kernels/gemm.h"
#include "runtime/comm/backends/mpi_communicator.h"
#include "runtime/comm/link/shard_study.h"
#include "runtime/comm/link/simulated_link.h"
#include "runtime/comm/timed_mpi.h"
#include "runtime/comm/thread_priority.h"
#include "runtime/train/plan/bucket_plan.h"
#include "runtime/train/plan/collective_program.h"
#include "runtime/train/run/datasets_from_config.h"
#include "runtime/train/plan/memory_estimate.h"
#include "runtime/train/plan/memory_limit.h"
#include "runtime/train/plan/shard_layout.h"
#include "runtime/train/run/startup_facts.h"
#include "runtime/train/step/step_options.h"

namespace zl {
namespace {

// The compute context of the run: runtime.timeout_s limits the host's waits for its stream (a
// loss or a norm read back on CUDA), so a stream stuck behind a dead peer's collective is an
// error; precision.compute = "tf32" lets fp32 GEMMs use TF32 tensor cores (ExecContext::gemm_math:
// a property of the calls made with this context, not of a shared cuBLAS handle; the CPU has no
// TF32 and computes those GEMMs in fp32).
ExecContext run_context(ExecContext exec, const Config& config, const World& world) {
  exec.host_wait_timeout_s = config.runtime.timeout_s;
  exec.cpu_threads = cpu_threads(config.runtime.threads, world);
  if (config.precision.compute == ComputePrecision::Tf32) exec.gemm_math = GemmMath::Tf32;
  return exec;
}

// Steps and micro-batches are counted in int64 (the sampler position adds up to an epoch to it):
// 2^53, far beyond any run, keeps every count exact in a double (metrics, lr schedule) and the
// arithmetic on it from overflowing.
constexpr std::int64_t kMaxMicroBatches = std::int64_t{1} << 53;

// The optimizer steps of the run: train.steps, or train.epochs whole epochs. The limits depend
// on the epoch's size, which only the loaded data gives.
std::int64_t checked_total_steps(const Config& config, std::int64_t steps_per_epoch) {
  const TrainConfig& t = config.train;
  const std::int64_t max_steps = kMaxMicroBatches / t.grad_accum;
  if (t.steps > 0) {
    if (t.steps > max_steps) {
      throw UserError(fmt::format(
          "{}: train.steps = {} with train.grad_accum = {} is more than the {} micro-batches a "
          "run may take; lower train.steps",
          where_set(config, "train.steps"), t.steps, t.grad_accum, kMaxMicroBatches));
    }
    return t.steps;
  }
  if (t.epochs > max_steps / steps_per_epoch) {
    throw UserError(fmt::format(
        "{}: train.epochs = {} of {} steps each (with train.grad_accum = {}) is more than the {} "
        "micro-batches a run may take; lower train.epochs",
        where_set(config, "train.epochs"), t.epochs, steps_per_epoch, t.grad_accum,
        kMaxMicroBatches));
  }
  return t.epochs * steps_per_epoch;
}

// Ranks that run another config or build would size their collectives differently (heap
// corruption, a crash) or train apart: they must agree before anything sized or scheduled by the
// config. That includes the device's set-up: runtime.device = "cuda" exchanges the ranks' GPUs
// (a collective "cpu" never enters), so the agreement runs first and returns the agreed config.
const Config& agreed(const Config& config, const World& world) {
  agree_on_facts(world, config_facts(config), config.runtime.timeout_s);
  return config;
}

// On the CPU, every collective of the step fits one MPI call (kMaxMpiCount elements per rank);
// otherwise UserError naming the bucket's largest parameter and what would fit. A bucket never
// splits a layer, so a layer above it is refused, not a run that fails at its first collective.
void check_collective_counts(const Config& config, const ModePlan& mode,
                             const PlannedLayout& planned, DeviceKind device) {
  if (device != DeviceKind::Cpu) return;  // NCCL's counts are 64-bit
  ModePlan one_micro_batch = mode;  // every micro-batch repeats the first one's collectives
  one_micro_batch.micro_batches = 1;
  for (const ProgramEntry& c : collective_program(one_micro_batch, planned.plan)) {
    const bool per_shard = c.op == CollectiveOp::ReduceScatter || c.op == CollectiveOp::AllGather;
    const std::int64_t count = c.elements / (per_shard ? planned.plan.world_size : 1);
    if (count <= kMaxMpiCount) continue;
    const Bucket& b = planned.plan.buckets[static_cast<std::size_t>(c.bucket)];
    const ParameterInfo& largest = planned.layout.info(*std::ranges::max_element(
        b.param_ids, {}, [&](int id) { return planned.layout.info(id).numel; }));
    throw UserError(fmt::format(
        "{}: bucket {} (its largest parameter {}: {} elements) would move {} elements per rank "
        "in one {}, more than one MPI call takes on the CPU ({}), and a bucket never splits a "
        "layer: lower model.widths, run on CUDA (runtime.device = \"cuda\"){}",
        where_set(config, "model.widths"), b.index, largest.name, largest.numel, count,
        collective_name(c.op), kMaxMpiCount,
        per_shard ? ", or shard it over more ranks"
                  : ", or shard it element-wise (parallel.mode = \"zero\", parallel.collective "
                    "= \"reduce_scatter_allgather\") over enough ranks"));
  }
}

}  // namespace

void check_trainable(const Config& config, const ModePlan& mode, int world, DeviceKind device) {
  const int ranks = planned_ranks(config, mode, world);
  if (ranks <= world) return;
  const std::string study = fmt::format(
      "{}: link.ranks = {} above the {} real ranks with parallel.collective = "
      "\"reduce_scatter_allgather\" is a timing study (each rank steps only the shard it would own "
      "among {}; the parameters are not trained)",
      where_set(config, "link.ranks"), ranks, world, ranks);
  // The study's collectives move a part of each bucket; the CPU's link model (a host task per
  // collective, shard_study.h) times the whole bucket, but the device's delays the comm stream by
  // the bytes the rank issues, and would time only the part. Both reasons in one message.
  const bool cuda = device == DeviceKind::Cuda, checkpoints = !config.checkpoint.dir.empty();
  if (cuda && checkpoints) {
    throw UserError(study + ", so it writes no checkpoints, and it runs on the CPU only: set "
                            "runtime.device = \"cpu\" and unset checkpoint.dir, or unset "
                            "link.ranks");
  }
  if (checkpoints) {
    throw UserError(study + ", so it writes no checkpoints: unset checkpoint.dir or link.ranks");
  }
  if (cuda) {
    throw UserError(study + ", which runs on the CPU only: set runtime.device = \"cpu\", or unset "
                            "link.ranks");
  }
}

TrainerSetup::TrainerSetup(const Config& config, const World& world, const TrainerOptions& options)
    : device(agreed(config, world).runtime.device, world, config.runtime.timeout_s,
             where_set(config, "runtime.device")),
      compute(run_context(device.compute(), config, world)),
      mode(make_run_mode_plan(config, world.size)),
      ranks(planned_ranks(config, mode, world.size)) {
  set_cpu_gemm_threads(compute.cpu_threads);
  // tf32 is the compute context's GEMM math (run_context); the CPU stays fp32, said once.
  if (config.precision.compute == ComputePrecision::Tf32 && compute.device == DeviceKind::Cpu &&
      world.is_root() && !options.quiet) {
    fmt::print("zerolap: precision.compute = \"tf32\" on the CPU: TF32 is a CUDA tensor-core "
               "format, so this run computes in fp32\n");
  }
  // Bad data (a missing file on one node, a model that does not fit) must end every rank before
  // any of them enters the communicator set-up below.
  agree_on_user_errors(world, [&] {
    check_shard_group(config, world.size);
    check_trainable(config, mode, world.size, compute.device);
    check_link_world(config.link, world.size, where_set(config, "link.node_ranks"));
    data = load_datasets(config);
    // Sized before allocated: a model that cannot fit is exit 2 naming the key, not an OOM kill.
    // The layout is the mode's (element shards pad every bucket: shard_layout.h).
    const PlannedLayout planned = plan_layout(config.model, config.parallel, mode, ranks);
    check_collective_counts(config, mode, planned, compute.device);
    // runtime.memory_limit_mb (a smaller device) can only tighten what the node has.
    check_memory_limit(config, world.size);
    check_memory_fits(
        estimate_rank_memory(config, planned.layout, planned.plan, mode, world.rank), config,
        compute.device, available_memory(compute.device), world.local_size);
    // The parameter dtype is the precision's (docs/design.md "Precision"): bf16 for bf16 compute.
    ModelSpec spec = config.model;
    spec.dtype = mode.param_dtype;
    // Stage 2 keeps no full gradient buffer: its gradient pool binds the gradients
    // (gradient_pool.h). Stage 3 keeps no flat parameters either: each rank's shards
    // (runtime/train/step/parameter_gather.h).
    model = std::make_unique<Model>(
        spec, compute.device, planned.padding,
        mode.pools_gradients() ? GradientStorage::Bound : GradientStorage::Flat,
        mode.gathers_parameters() ? ParamStorage::Gathered : ParamStorage::Flat);
    // The model's layout is planned.layout: the same spec (but the dtype) and padding.
    ZL_CHECK(model->store().total_numel() == planned.layout.total_numel(),
             "the model's layout has {} elements, the planned one {}",
             model->store().total_numel(), planned.layout.total_numel());
    plan = planned.plan;
    // With a global batch, the per-rank batch and grad_accum are derived from it (global_batch.h):
    // the one key to lower is data.global_batch_size.
    if (config.data.global_batch_size > data.train.num_samples) {
      throw UserError(fmt::format(
          "{}: data.global_batch_size ({}) exceeds the {} samples of {}: a step's samples all "
          "come from one epoch; lower data.global_batch_size",
          where_set(config, "data.global_batch_size"), config.data.global_batch_size,
          data.train.num_samples, data.train.name));
    }
    try {
      sampler = std::make_unique<DistributedSampler>(SamplerSpec{
          .num_samples = data.train.num_samples,
          .local_batch = config.data.batch_size,
          .world_size = world.size,
          .shuffle = config.data.shuffle,
          .seed = config.data.seed,
          .dataset_name = data.train.name,
      });
    } catch (const UserError& e) {  // the data layer knows no config: the place is added here
      throw UserError(fmt::format("{}: {}", where_set(config, "data.batch_size"), e.what()));
    }
    steps_per_epoch = sampler->batches_per_epoch() / config.train.grad_accum;
    if (steps_per_epoch < 1) {
      // The sampler checked that one global batch fits, so the product is below
      // grad_accum * the sample count: no overflow.
      const std::string accum_at = where_set(config, "train.grad_accum");
      const std::string batch_at = where_set(config, "data.batch_size");
      throw UserError(fmt::format(
          "{}: train.grad_accum ({}) x data.batch_size ({}) x world size ({}) = {} exceeds the {} "
          "samples of {}: a step's micro-batches all come from one epoch; lower "
          "train.grad_accum or data.batch_size, or run on fewer ranks",
          accum_at == batch_at ? accum_at : accum_at + " and " + batch_at,
          config.train.grad_accum, config.data.batch_size, world.size,
          config.train.grad_accum * config.data.batch_size * world.size, data.train.num_samples,
          data.train.name));
    }
    total_steps = checked_total_steps(config, steps_per_epoch);
  }, config.runtime.timeout_s);
  // The same for the data each rank loaded (node-local files may differ).
  agree_on_facts(world, data_facts(config, data), config.runtime.timeout_s);

  if (world.is_root() && !options.quiet) {
    fmt::print("zerolap: {}\n", device.summary());
    if (ranks > world.size) {
      fmt::print("zerolap: simulated: link.ranks = {}, so each rank steps only the shard it would "
                 "own among {} ranks (a timing study; the parameters are not trained)\n",
                 ranks, ranks);
    }
    std::fflush(stdout);
    const std::string warning = comm_priority_warning(config.runtime.comm_priority, compute.device);
    if (!warning.empty()) fmt::print(stderr, "{}\n", warning);
  }
  // Construction order is the same on every rank (each construction is a collective): MPI on the
  // CPU, NCCL on CUDA (a unique id per communicator, sent over the MPI communicator it splits).
  const CommOptions comm_opts = comm_options(config.runtime);
  if (mode.replicas > 1) {
    // Hybrid sharding: rank r is member r mod G of group r / G (consecutive ranks, as mpirun
    // places a node's ranks together); its replicas are the members with its index in the other
    // groups (Note [Replica all-reduce]).
    const int group = mode.mode.shard_group;
    const WaitLimit limit{world.rank, config.runtime.timeout_s};
    MPI_Comm in_group = timed_comm_split(world.comm, world.rank / group, world.rank % group,
                                         limit, "splitting the ranks into shard groups");
    MPI_Comm across = timed_comm_split(world.comm, world.rank % group, world.rank / group, limit,
                                       "splitting the ranks into shard replicas");
    reduce_comm = device.make_communicator(in_group, "comm.reduce", comm_opts);
    broadcast_comm = device.make_communicator(in_group, "comm.broadcast", comm_opts);
    replica_comm = device.make_communicator(across, "comm.replica", comm_opts);
    world_comm = device.make_communicator(world.comm, "comm.world", comm_opts);
    MPI_Comm_free(&in_group);  // each communicator holds its own duplicate
    MPI_Comm_free(&across);
  } else {
    reduce_comm = device.make_communicator(world.comm, "comm.reduce", comm_opts);
    broadcast_comm = device.make_communicator(world.comm, "comm.broadcast", comm_opts);
  }
  if (ranks > world.size) {  // the timing study (runtime/comm/link/shard_study.h), inside the link
    reduce_comm = std::make_unique<ShardStudyCommunicator>(std::move(reduce_comm), ranks);
    broadcast_comm = std::make_unique<ShardStudyCommunicator>(std::move(broadcast_comm), ranks);
  }
  // Each communicator of the step through the link model, then the caller's wrapper. One link
  // per rank and tier, shared by the streams of that tier (Note [Link occupancy]); on CUDA it
  // delays the comm streams on the device (Note [Link on the device]). A communicator of every
  // rank is timed as the modelled world; with hybrid sharding a shard group as its G consecutive
  // ranks (inside a modelled node when they fit one), the replicas as one rank of every group.
  if (config.link.enabled()) {
    const RankLinks links = make_rank_links(config.link, config.runtime.timeout_s);
    const CommSpans spans = comm_spans(mode, config.link, world.size);  // as plan and bench time
    const std::pair<std::unique_ptr<Communicator>*, LinkSpan> timed[] = {
        {&reduce_comm, spans.of(CommRole::Reduce)},
        {&broadcast_comm, spans.of(CommRole::Broadcast)},
        {&replica_comm, spans.of(CommRole::Replica)},
        {&world_comm, flat_link_span(config.link, world.size)}};
    for (const auto& [comm, span] : timed) {
      if (*comm) *comm = with_simulated_link(std::move(*comm), links, span);
    }
  }
  if (options.wrap_comm) {
    for (auto* comm : {&reduce_comm, &broadcast_comm, &replica_comm, &world_comm}) {
      if (*comm) *comm = options.wrap_comm(std::move(*comm));
    }
  }
  // docs/design.md, "Divergence": on CUDA a per-step verdict would drain the stream every step;
  // a stop can wait for the log window, a clip, a skip or a loss limit cannot.
  step_check = options.step_check.value_or(
      compute.device == DeviceKind::Cuda && !verdict_needed_every_step(config.train)
          ? StepCheck::EveryLogWindow
          : StepCheck::EveryStep);
}

}  // namespace zl
