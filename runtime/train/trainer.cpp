// Trainer: the per-rank training loop (see trainer.h).
#include "runtime/train/trainer.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <fstream>

#include <fmt/format.h>

#include "kernels/elementwise.h"
#include "base/checked_write.h"
#include "base/errors.h"
#include "base/fault_stop.h"
#include "kernels/gemm.h"
#include "models/losses.h"
#include "base/clock.h"
#include "runtime/train/datasets_from_config.h"
#include "runtime/train/memory_estimate.h"
#include "runtime/train/startup_facts.h"
#include "runtime/comm/simulated_link.h"
#include "runtime/comm/thread_priority.h"
#include "runtime/trace/metrics.h"

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

std::int64_t micro_batches_per_epoch(const DistributedSampler& sampler) {
  return sampler.steps_per_epoch();
}

// Steps and micro-batches are counted in int64 (the sampler position adds up to an epoch to it):
// 2^53, far beyond any run, keeps every count exact in a double (metrics, lr schedule) and the
// arithmetic on it from overflowing.
constexpr std::int64_t kMaxMicroBatches = std::int64_t{1} << 53;

// The optimizer steps of the run: train.steps, or train.epochs whole epochs.
std::int64_t checked_total_steps(const Config& config, std::int64_t steps_per_epoch) {
  const TrainConfig& t = config.train;
  const std::int64_t max_steps = kMaxMicroBatches / t.grad_accum;
  if (t.steps > 0) {
    if (t.steps > max_steps) {
      throw UserError(fmt::format(
          "{}: train.steps = {} with train.grad_accum = {} is more than the {} micro-batches a "
          "run may take; lower train.steps",
          config.source_path, t.steps, t.grad_accum, kMaxMicroBatches));
    }
    return t.steps;
  }
  if (t.epochs > max_steps / steps_per_epoch) {
    throw UserError(fmt::format(
        "{}: train.epochs = {} of {} steps each (with train.grad_accum = {}) is more than the {} "
        "micro-batches a run may take; lower train.epochs",
        config.source_path, t.epochs, steps_per_epoch, t.grad_accum, kMaxMicroBatches));
  }
  return t.epochs * steps_per_epoch;
}

}  // namespace

void Trainer::load_data_and_model() {
  data_ = load_datasets(config_);
  // Sized before allocated: a model that cannot fit is exit 2 naming the key, not an OOM kill.
  const ParameterStore layout = Model::parameter_layout(config_.model);
  const BucketPlan layout_plan =
      build_bucket_plan(layout, config_.parallel.bucket_cap_mb,
                        config_.parallel.first_bucket_cap_mb, world_.size,
                        config_.parallel.assignment);
  check_memory_fits(estimate_rank_memory(config_, layout, layout_plan, mode_plan_, world_.rank),
                    config_, compute_.device, available_memory(compute_.device),
                    world_.local_size);
  // The parameter dtype is the precision's (docs/design.md "Precision"): bf16 for compute = "bf16".
  ModelSpec spec = config_.model;
  spec.dtype = mode_plan_.param_dtype;
  model_ = std::make_unique<Model>(spec, compute_.device);

  SamplerSpec sampler_spec;
  sampler_spec.num_samples = data_.train.num_samples;
  sampler_spec.local_batch = config_.data.batch_size;
  sampler_spec.world_size = world_.size;
  sampler_spec.shuffle = config_.data.shuffle;
  sampler_spec.seed = config_.data.seed;
  sampler_spec.dataset_name = data_.train.name;
  sampler_ = std::make_unique<DistributedSampler>(sampler_spec);
  steps_per_epoch_ = micro_batches_per_epoch(*sampler_) / config_.train.grad_accum;
  if (steps_per_epoch_ < 1) {
    throw UserError(fmt::format(
        "{}: train.grad_accum = {} micro-batches of data.batch_size = {} on {} ranks need more "
        "than the {} training samples of one epoch; lower the batch size or grad_accum",
        config_.source_path, config_.train.grad_accum, config_.data.batch_size, world_.size,
        data_.train.num_samples));
  }
  total_steps_ = checked_total_steps(config_, steps_per_epoch_);
}

Trainer::Trainer(const Config& config, const World& world, TrainerOptions options)
    : config_(config),
      world_(world),
      options_(options),
      device_(config.runtime.device, world, config.runtime.timeout_s),
      compute_(run_context(device_.compute(), config, world)),
      tracer_(world.rank, config.output.trace),
      mode_plan_(make_mode_plan(config.parallel, config.optimizer, config.precision)),
      tape_(compute_),
      loss_window_(compute_) {
  set_cpu_gemm_threads(compute_.cpu_threads);
  // Ranks that run another config or build would size their collectives differently (heap
  // corruption, a crash) or train apart: they must agree before anything sized by the config.
  agree_on_facts(world_, config_facts(config_), config_.runtime.timeout_s);
  // tf32 is the compute context's GEMM math (run_context); the CPU stays fp32, said once.
  if (config.precision.compute == ComputePrecision::Tf32 && compute_.device == DeviceKind::Cpu &&
      world_.is_root() && !options_.quiet) {
    fmt::print("zerolap: precision.compute = \"tf32\" on the CPU: TF32 is a CUDA tensor-core "
               "format, so this run computes in fp32\n");
  }
  // Bad data (a missing file on one node, a model that does not fit) must end every rank before
  // any of them enters the communicator set-up below.
  agree_on_user_errors(world_, [&] { load_data_and_model(); }, config_.runtime.timeout_s);
  // The same for the data each rank loaded (node-local files may differ).
  agree_on_facts(world_, data_facts(config_, data_), config_.runtime.timeout_s);

  if (world_.is_root() && !options_.quiet) {
    fmt::print("zerolap: {}\n", device_.summary());
    std::fflush(stdout);
    const std::string warning = comm_priority_warning(config_.runtime.comm_priority, compute_.device);
    if (!warning.empty()) fmt::print(stderr, "{}\n", warning);
  }
  // Construction order is the same on every rank (each construction is a collective): MPI on the
  // CPU, NCCL on CUDA.
  reduce_comm_ =
      device_.make_communicator(world_.comm, "comm.reduce", comm_options(config_.runtime));
  broadcast_comm_ =
      device_.make_communicator(world_.comm, "comm.broadcast", comm_options(config_.runtime));
  if (config_.link.enabled()) {
    // One link per rank, shared by both streams (Note [Link occupancy]); on CUDA it delays the
    // comm streams on the device (Note [Link on the device]).
    auto link = std::make_shared<SimulatedLink>(config_.link, config_.runtime.timeout_s);
    reduce_comm_ = with_simulated_link(std::move(reduce_comm_), link);
    broadcast_comm_ = with_simulated_link(std::move(broadcast_comm_), link);
  }
  if (options_.wrap_comm) {
    reduce_comm_ = options_.wrap_comm(std::move(reduce_comm_));
    broadcast_comm_ = options_.wrap_comm(std::move(broadcast_comm_));
  }
  reduce_comm_->set_tracer(&tracer_);
  broadcast_comm_->set_tracer(&tracer_);

  plan_ = build_bucket_plan(model_->store(), config_.parallel.bucket_cap_mb,
                            config_.parallel.first_bucket_cap_mb, world_.size,
                            config_.parallel.assignment);
  // bf16: the masters start from the fp32 values the bf16 parameters were rounded from.
  const std::vector<float> initial_fp32 =
      mode_plan_.param_dtype == DType::BF16 ? model_->initial_parameters() : std::vector<float>{};
  optimizer_ = std::make_unique<ShardedOptimizer>(config_.optimizer, plan_, model_->store(),
                                                  world_.rank, mode_plan_, total_steps_,
                                                  initial_fp32);
  // docs/design.md, "Divergence": on CUDA a per-step verdict would drain the stream every step;
  // a stop can wait for the log window, a clip, a skip or a loss limit cannot.
  const bool verdict_needed_per_step = config_.train.clip_grad_norm > 0.0f ||
                                       config_.train.on_nonfinite == OnNonfinite::SkipStep ||
                                       config_.train.max_loss > 0.0;
  step_check_ = options_.step_check.value_or(
      compute_.device == DeviceKind::Cuda && !verdict_needed_per_step ? StepCheck::EveryLogWindow
                                                                     : StepCheck::EveryStep);
  data_parallel_ = std::make_unique<DataParallelStep>(
      mode_plan_,
      DataParallelOptions{config_.train.clip_grad_norm, config_.train.grad_accum,
                          config_.train.on_nonfinite, step_check_, config_.train.max_loss},
      plan_, model_->store(), *optimizer_, *reduce_comm_, *broadcast_comm_, compute_, &tracer_);
  data_parallel_->broadcast_initial_parameters();
  if (tracer_.enabled()) {
    layer_trace_ = std::make_unique<LayerTrace>(tracer_, model_->store());
    layer_trace_->observe_backward(tape_);
  }

  if (world_.is_root() && options_.write_outputs) {
    ensure_output_dir(config_.output.dir);
    write_whole_file((std::filesystem::path(config_.output.dir) / "config.toml").string(),
                     to_toml(config_), "the effective config");
  }
}

Trainer::~Trainer() {
  // Let in-flight work finish before the buffers it touches go away. A destructor must not throw;
  // the commands end the job with run_or_abort before unwinding reaches here after a failure.
  try {
    if (data_parallel_) data_parallel_->synchronize();
  } catch (...) {
  }
  // The comm threads may still hold callbacks that use the optimizer, the bucket steps and the other
  // communicator: stop them first, the reduce stream (which issues broadcasts) before the
  // broadcast stream, then let the members go in reverse order.
  reduce_comm_.reset();
  broadcast_comm_.reset();
}

std::int64_t Trainer::micro_batch_loss(const std::vector<std::int64_t>& indices) {
  const auto batch = static_cast<std::int64_t>(indices.size());
  const Dataset& train = data_.train;
  host_x_.resize(static_cast<std::size_t>(batch * train.feature_dim));
  const bool classification = train.task == TaskKind::Classification;
  if (classification) {
    host_labels_.resize(static_cast<std::size_t>(batch));
  } else {
    host_targets_.resize(static_cast<std::size_t>(batch * train.target_dim));
  }
  gather_batch(train, indices.data(), batch, host_x_.data(),
               classification ? host_labels_.data() : nullptr,
               classification ? nullptr : host_targets_.data());
  if (batch > 0 && fault_nonfinite_input(position_.step + 1, world_.rank)) {
    host_x_[0] = std::numeric_limits<float>::quiet_NaN();  // the test hook (base/fault_stop.h)
  }

  tape_.reset();
  const BatchOnDevice in = batch_on_device(classification);
  const Tensor x{in.x, batch, train.feature_dim, compute_.device};
  const ForwardResult out =
      layer_trace_ ? model_->forward(tape_, x, layer_trace_->forward_hook(data_parallel_->param_use_hook()))
                   : model_->forward(tape_, x, data_parallel_->param_use_hook());
  if (layer_trace_) layer_trace_->end_forward();
  if (classification) {
    loss_window_.add_classification(out.output, in.labels, out.grad_output);
  } else {
    loss_window_.add_regression(out.output, in.targets, out.grad_output);
  }
  return batch;
}

Trainer::BatchOnDevice Trainer::batch_on_device(bool classification) {
  if (compute_.device == DeviceKind::Cpu) {
    return BatchOnDevice{host_x_.data(), host_labels_.data(), host_targets_.data()};
  }
  // Device buffers grow only for a batch larger than any before (the first step, the first
  // evaluation): allocating synchronises the device, which the steady-state step never does.
  // Reusing them is safe: each copy is stream-ordered after the previous batch's kernels.
  auto upload = [this](DeviceBuffer& dst, const void* host, std::size_t count) {
    if (dst.size() < static_cast<std::int64_t>(count)) {
      dst = DeviceBuffer(compute_.device, static_cast<std::int64_t>(count));
    }
    copy_to_device_async(compute_, host, dst.data(), count * sizeof(float));
  };
  static_assert(sizeof(std::int32_t) == sizeof(float), "labels travel in a float-sized buffer");
  upload(device_x_, host_x_.data(), host_x_.size());
  BatchOnDevice b{device_x_.data(), nullptr, nullptr};
  if (classification) {
    upload(device_labels_, host_labels_.data(), host_labels_.size());
    b.labels = reinterpret_cast<const std::int32_t*>(device_labels_.data());
  } else {
    upload(device_targets_, host_targets_.data(), host_targets_.size());
    b.targets = device_targets_.data();
  }
  return b;
}

void Trainer::train_step() {
  const std::int64_t per_epoch = micro_batches_per_epoch(*sampler_);
  // A step's micro-batches come from one epoch (Note [Epochs and accumulation]).
  const std::int64_t left_in_epoch = per_epoch - position_.cursor % per_epoch;
  if (left_in_epoch < config_.train.grad_accum) position_.cursor += left_in_epoch;
  for (std::int64_t micro = 0; micro < config_.train.grad_accum; ++micro) {
    sampler_->batch_indices(position_.cursor / per_epoch, position_.cursor % per_epoch, world_.rank, indices_);
    ++position_.cursor;
    auto phase_start = Clock::now();
    {
      TraceSpan span(&tracer_, "main", "forward", {{"step", position_.step + 1}, {"micro_batch", micro}});
      TimelineScope timed(&tracer_.timeline(), compute_, "compute", "forward");
      micro_batch_loss(indices_);
    }
    phase_seconds_.forward += seconds_since(phase_start);
    phase_start = Clock::now();
    data_parallel_->begin_backward(micro);
    {
      TraceSpan span(&tracer_, "main", "backward", {{"step", position_.step + 1}, {"micro_batch", micro}});
      TimelineScope timed(&tracer_.timeline(), compute_, "compute", "backward");
      BackwardContext ctx;
      ctx.accumulate = data_parallel_->accumulate_mode();
      ctx.on_grad_ready = &data_parallel_->grad_ready_hook();
      tape_.backward(ctx);
    }
    phase_seconds_.backward += seconds_since(phase_start);
  }
  const auto finish_start = Clock::now();
  StepVerdict verdict;
  {
    TraceSpan span(&tracer_, "main", "finish_backward", {{"step", position_.step + 1}});
    verdict = data_parallel_->finish_backward([this] { return loss_window_.step_loss(); });
  }
  phase_seconds_.finish_backward += seconds_since(finish_start);
  const std::int64_t step = position_.step + 1;
  if (!verdict.finite && config_.train.on_nonfinite == OnNonfinite::Stop) {
    throw NonfiniteStop(fmt::format(
        "diverged at {}; train.on_nonfinite = \"stop\" ends the run here, and no checkpoint of "
        "this step or later is written (lower optimizer.lr, set train.clip_grad_norm, or set "
        "train.on_nonfinite = \"skip_step\" to skip such steps)",
        describe_nonfinite(verdict, step)));
  }
  if (!verdict.finite) {
    // Every rank left its parameters and optimizer state as they were (docs/design.md,
    // "Divergence"); the step still consumed its data.
    ++skipped_steps_;
    if (world_.is_root() && !options_.quiet) {
      fmt::print("zerolap: skipped {} (train.on_nonfinite = \"skip_step\"; {} skipped so far)\n",
                 describe_nonfinite(verdict, step), skipped_steps_);
      std::fflush(stdout);
    }
  }
  loss_window_.end_step(verdict.finite ? StepCount::Counted : StepCount::Skipped);
  ++position_.step;
}

double Trainer::window_check_value() {
  if (step_check_ == StepCheck::EveryStep) return 0.0;
  data_parallel_->synchronize();
  const ParameterStore& store = model_->store();
  return store.param_dtype() == DType::BF16
             ? sum_of_squares(compute_, store.params_as<Bf16>(), store.total_numel())
             : sum_of_squares(compute_, store.params_as<float>(), store.total_numel());
}

void Trainer::check_window(double loss_sum, double check_value, std::int64_t first_step,
                           std::int64_t last_step) const {
  if (step_check_ == StepCheck::EveryStep) return;  // every step was checked already
  const bool loss_bad = !std::isfinite(loss_sum);
  if (!loss_bad && std::isfinite(check_value)) return;
  throw NonfiniteStop(fmt::format(
      "diverged between steps {} and {} (checked once per log window on CUDA; train.log_every = 1 "
      "names the step): {}; train.on_nonfinite = \"stop\" ends the run here, and no checkpoint "
      "of these steps is written (lower optimizer.lr, or set train.clip_grad_norm)",
      first_step, last_step,
      loss_bad ? "the training loss summed over ranks is not finite"
               : "the parameters are not finite"));
}

void Trainer::reset_step_stats() {
  reduce_comm_->reset_stats();
  broadcast_comm_->reset_stats();
  optimizer_->reset_timers();
  phase_seconds_ = PhaseSeconds{};
  tracer_.clear();
  tracer_.reset_origin();
  tracer_.timeline().start(compute_);
  timeline_origin_us_ = tracer_.now_us();
}

RankMemory Trainer::allocated_memory() const {
  const ParameterStore& store = model_->store();
  RankMemory m;
  m.parameters = store.param_bytes();
  m.gradients = store.grad_bytes() + data_parallel_->wire_bytes();  // + bf16 wire buffer
  m.master = optimizer_->master_bytes();  // 0 in fp32: the parameters are their own masters
  m.state = optimizer_->state_bytes();
  return m;
}

StepStats Trainer::step_stats() {
  tracer_.timeline().stop();
  StepStats s;
  s.host = phase_seconds_;
  s.optimizer_host_s = optimizer_->optimizer_seconds();
  s.reduce = reduce_comm_->stats();
  s.broadcast = broadcast_comm_->stats();
  s.optimizer_state_bytes = optimizer_->state_bytes();
  s.allocated = allocated_memory();
  s.timeline = tracer_.timeline().spans();
  s.timeline_origin_us = timeline_origin_us_;
  if (tracer_.enabled() && compute_.device == DeviceKind::Cuda) {
    // The GPU streams' spans beside the host's: their own threads in the Chrome trace, placed on
    // the tracer's clock through the timeline's origin (aligned to a few us).
    for (const TimelineSpan& t : s.timeline) {
      tracer_.span("gpu " + t.stream, t.name, timeline_origin_us_ + t.begin_s * 1e6,
                   timeline_origin_us_ + t.end_s * 1e6,
                   t.bucket >= 0 ? nlohmann::json{{"bucket", t.bucket}, {"clock", "gpu"}}
                                 : nlohmann::json{{"clock", "gpu"}});
    }
  }
  if (tracer_.enabled()) s.trace_events = tracer_.events();
  return s;
}

std::vector<double> Trainer::sum_over_ranks(std::vector<double> values) {
  reduce_comm_->all_reduce_f64(values.data(), static_cast<std::int64_t>(values.size())).wait();
  return values;
}

EvalResult Trainer::evaluate() {
  data_parallel_->synchronize();
  const Dataset& test = data_.test;
  const Shard shard = eval_shard(test.num_samples, world_.rank, world_.size);
  const bool classification = test.task == TaskKind::Classification;
  double loss_sum = 0.0, correct = 0.0;
  for (std::int64_t begin = shard.begin; begin < shard.end; begin += config_.data.eval_batch_size) {
    const std::int64_t batch = std::min(config_.data.eval_batch_size, shard.end - begin);
    indices_.resize(static_cast<std::size_t>(batch));
    for (std::int64_t i = 0; i < batch; ++i) indices_[static_cast<std::size_t>(i)] = begin + i;
    host_x_.resize(static_cast<std::size_t>(batch * test.feature_dim));
    host_labels_.resize(static_cast<std::size_t>(batch));
    host_targets_.resize(static_cast<std::size_t>(batch * std::max<std::int64_t>(1, test.target_dim)));
    gather_batch(test, indices_.data(), batch, host_x_.data(),
                 classification ? host_labels_.data() : nullptr,
                 classification ? nullptr : host_targets_.data());
    tape_.reset();
    const BatchOnDevice in = batch_on_device(classification);
    const Tensor x{in.x, batch, test.feature_dim, compute_.device};
    const ForwardResult out = model_->forward(tape_, x);
    if (classification) {
      std::int64_t c = 0;
      loss_sum += cross_entropy_loss(compute_, out.output, in.labels, Tensor{}, 1.0f, &c);
      correct += static_cast<double>(c);
    } else {
      // Per-sample loss: the mean squared error over that sample's outputs.
      loss_sum += squared_error_loss(compute_, out.output, in.targets, Tensor{}, 1.0f) /
                  static_cast<double>(out.output.cols);
    }
  }
  tape_.reset();
  fault_stop_point("evaluation", world_.rank);
  const auto sums = sum_over_ranks({loss_sum, correct, static_cast<double>(shard.end - shard.begin)});
  EvalResult r;
  r.samples = static_cast<std::int64_t>(sums[2]);
  r.loss = r.samples > 0 ? sums[0] / sums[2] : 0.0;
  r.accuracy = classification && r.samples > 0 ? sums[1] / sums[2] : 0.0;
  return r;
}

TrainingState Trainer::state() {
  synchronize();
  return TrainingState{config_,
                       world_,
                       model_->store(),
                       *optimizer_,
                       plan_,
                       mode_plan_,
                       position_,
                       resumed_step_,
                       total_steps_,
                       sampler_->steps_per_epoch(),
                       &tracer_,
                       options_.quiet};
}

}  // namespace zl
