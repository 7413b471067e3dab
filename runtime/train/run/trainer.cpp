// Trainer: construction, evaluation, state and accessors (see trainer.h; the step is
// train_step.cpp).
#include "runtime/train/run/trainer.h"

#include "runtime/train/run/divergence_window.h"

namespace zl {

Trainer::Trainer(const Config& config, const World& world, TrainerOptions options)
    : config_(config),
      world_(world),
      options_(std::move(options)),
      setup_(config_, world_, options_),
      tracer_(world.rank, config.output.trace),
      step_options_(make_step_options(config.train, setup_.step_check)),
      tape_(setup_.compute),
      loss_window_(setup_.compute),
      batches_(setup_.compute) {
  for (auto* comm : {&setup_.reduce_comm, &setup_.broadcast_comm, &setup_.replica_comm,
                     &setup_.world_comm}) {
    if (*comm) (*comm)->set_tracer(&tracer_);
  }
  // bf16: the masters start from the fp32 values the bf16 parameters were rounded from.
  // Stage 3: every rank's parameter shards start from them too. Each draws its own ranges: no
  // rank holds a copy of the whole model (stage 3 ran 4 bytes a parameter above its plan).
  const InitialValues initial_fp32 = setup_.model->initial_values();
  const BucketPlan& plan = setup_.plan;
  if (setup_.mode.gathers_parameters()) {
    shards_ = std::make_unique<ParameterShards>(setup_.mode, plan, setup_.model->store(),
                                                world_.rank, initial_fp32);
  }
  optimizer_ = std::make_unique<RankOptimizer>(config_.optimizer, plan, setup_.model->store(),
                                               world_.rank, setup_.mode, setup_.total_steps,
                                               initial_fp32, shards_.get());
  parts_ = std::make_unique<StepParts>(setup_.mode, step_options_, plan, setup_.model->store(),
                                       *optimizer_, setup_.comms(), setup_.compute, &tracer_,
                                       shards_.get());
  parts_->broadcast_initial_parameters();
  grad_ready_hook_ = [this](int param_id) { gradient_ready(param_id); };
  if (setup_.mode.pools_gradients()) {
    grad_write_hook_ = [&pool = parts_->gradients.pool(), this](int param_id) {
      pool.before_grad_write(param_id, setup_.compute);
    };
  }
  if (setup_.mode.gathers_parameters()) {
    // Stage 3: forward and backward gather each bucket where they first read it.
    param_use_hook_ = [&gather = parts_->gather()](int id) { gather.before_forward_read(id); };
    backward_read_hook_ = [&gather = parts_->gather()](int id) { gather.before_backward_read(id); };
  } else {
    param_use_hook_ = [this, &bucket_of = plan.bucket_of_param](int param_id) {
      parts_->buckets.wait_for_bucket(bucket_of[static_cast<std::size_t>(param_id)]);
    };
  }
  if (tracer_.enabled()) {
    layer_trace_ = std::make_unique<LayerTrace>(tracer_, setup_.model->store());
    layer_trace_->observe_backward(tape_);
    traced_param_use_hook_ = layer_trace_->forward_hook(param_use_hook_);
  }
}

Trainer::~Trainer() {
  // Let in-flight work finish before the buffers it touches go away. A destructor must not throw;
  // the commands end the job with run_or_abort before unwinding reaches here after a failure.
  try {
    if (parts_) parts_->synchronize();
  } catch (...) {
  }
  // The comm threads may still hold continuations that use the optimizer, the bucket steps and
  // the other communicators: stop them first, the streams that issue broadcasts (the replica
  // stream, which also waits for the reduce stream's work, then the reduce stream) before the
  // broadcast stream, then let the members go in reverse order.
  setup_.replica_comm.reset();
  setup_.reduce_comm.reset();
  setup_.broadcast_comm.reset();
  setup_.world_comm.reset();
}

double Trainer::window_check_value() {
  if (step_options_.step_check == StepCheck::EveryStep) return 0.0;
  parts_->synchronize();
  // Stage 3 has no whole parameters between steps: each rank checks its shards.
  if (shards_) return shards_->sum_of_squares(setup_.compute);
  return zl::window_check_value(setup_.model->store(), setup_.compute);
}

void Trainer::check_window(double loss_sum, double check_value, std::int64_t first_step,
                           std::int64_t last_step) const {
  zl::check_window(step_options_.step_check, loss_sum, check_value, first_step, last_step);
}

RankMemory Trainer::allocated_memory() const {
  const ParameterStore& store = setup_.model->store();
  std::int64_t gathered = 0;  // stage 3: the shards and the gather buffers
  if (shards_) gathered = shards_->bytes() + parts_->gather().gather_bytes();
  return RankMemory{
      .parameters = store.param_bytes() + gathered,
      .gradients = store.grad_bytes() + parts_->gradients.bytes(),
      .master = optimizer_->master_bytes(),  // 0 in fp32: the parameters are their own masters
      .state = optimizer_->state_bytes(),
      .gradient_pool = parts_->gradients.pool_bytes(),
  };
}

std::vector<double> Trainer::sum_over_ranks(std::vector<double> values) {
  const auto count = static_cast<std::int64_t>(values.size());
  setup_.comms().every_rank().all_reduce_f64(values.data(), count).wait();
  return values;
}

EvalResult Trainer::evaluate() {
  parts_->synchronize();
  return evaluate_test_split(EvalParts{.test = setup_.data.test,
                                       .eval_batch_size = config_.data.eval_batch_size,
                                       .model = *setup_.model,
                                       .tape = tape_,
                                       .batches = batches_,
                                       .comm = setup_.comms().every_rank(),
                                       .compute = setup_.compute,
                                       .gather = parameter_gather()});
}

TrainingState Trainer::state() {
  synchronize();
  return TrainingState{.config = config_,
                       .world = world_,
                       .store = setup_.model->store(),
                       .optimizer = *optimizer_,
                       .plan = setup_.plan,
                       .mode = setup_.mode,
                       .position = position_,
                       .resumed_step = resumed_step_,
                       .total_steps = setup_.total_steps,
                       .batches_per_epoch = setup_.sampler->batches_per_epoch(),
                       .tracer = &tracer_,
                       .quiet = options_.quiet};
}

}  // namespace zl
