// Trainer: the training state of one rank and its step. It owns everything of a run except the
// world (TrainerSetup: device, data, model, communicators; then bucket plan, optimizer and the
// step's parts) and runs steps (train_step.cpp: the step top to bottom), evaluation
// (evaluation.h) and the per-window divergence check (divergence_window.h). Every rank constructs
// it with the same config (collective). The run loop is runtime/cli/training_run.h.
//
// Note [Epochs and accumulation]: an optimizer step takes train.grad_accum micro-batches, all of
// one epoch. When fewer than grad_accum are left in the current epoch, they are skipped, as a
// data loader with drop_last drops a partial batch. So an epoch is exactly steps_per_epoch()
// steps, `train.epochs = E` makes E passes that each start at the epoch's first batch, the epoch
// the metrics report is the sampler's, and A micro-batches of B samples take the same samples as
// one batch of A*B (floor(floor(N/B)/A) = floor(N/(A*B)); tested across epoch boundaries).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "base/tracer.h"
#include "models/tape.h"
#include "runtime/trace/layer_trace.h"
#include "runtime/train/run/batch_loader.h"
#include "runtime/train/run/evaluation.h"
#include "runtime/train/run/loss_window.h"
#include "runtime/train/step/step_parts.h"
#include "runtime/train/run/trainer_setup.h"
#include "runtime/train/run/training_state.h"

namespace zl {

class Trainer {
 public:
  Trainer(const Config& config, const World& world, TrainerOptions options = {});
  ~Trainer();
  Trainer(const Trainer&) = delete;  // the step's parts hold references into it

  // One optimizer step (grad_accum micro-batches; train_step.cpp). A non-finite step throws
  // NonfiniteStop under on_nonfinite = "stop"; "skip_step" only moves the data and step count.
  void train_step();
  StepLoss take_loss() { return loss_window_.take(); }  // this rank's, since the last call
  EvalResult evaluate();  // on the test split, sharded over ranks (evaluation.h)
  void synchronize() { parts_->synchronize(); }  // every collective, step and publish done
  TrainingState state();  // after synchronize(): what a checkpoint saves and restores
  std::vector<double> sum_over_ranks(std::vector<double> values);  // collective, on the host

  // The per-window divergence check (divergence_window.h) with this run's StepCheck.
  double window_check_value();
  void check_window(double loss_sum, double check_value, std::int64_t first_step,
                    std::int64_t last_step) const;
  std::int64_t skipped_steps() const { return skipped_steps_; }
  double last_grad_norm() const { return parts_->schedule->last_grad_norm(); }

  const Config& config() const { return config_; }
  const World& world() const { return world_; }
  const TrainerOptions& options() const { return options_; }
  Model& model() { return *setup_.model; }
  const BucketPlan& plan() const { return setup_.plan; }
  RankOptimizer& optimizer() { return *optimizer_; }
  const ModePlan& mode_plan() const { return setup_.mode; }
  TaskKind task() const { return setup_.data.train.task; }
  // The compute stream, with the run's GEMM math (tf32) and host-wait limit.
  const ExecContext& compute_context() const { return setup_.compute; }
  StepComms comms() const { return setup_.comms(); }
  Tracer& tracer() { return tracer_; }
  RankMemory allocated_memory() const;  // as ModePlan's rank_memory counts it (tested equal)
  std::int64_t gradient_store_bytes() const { return parts_->gradients.bytes(); }

  std::int64_t step() const { return position_.step; }  // optimizer steps completed
  std::int64_t total_steps() const { return setup_.total_steps; }
  std::int64_t steps_per_epoch() const { return setup_.steps_per_epoch; }
  // The sampler position: micro-batches consumed, or skipped at an epoch's end (Note [Epochs and
  // accumulation]); checkpoints store it with the sampler's global batches per epoch.
  std::int64_t batch_cursor() const { return position_.cursor; }
  std::int64_t batches_per_epoch() const { return setup_.sampler->batches_per_epoch(); }

  // Tests: stage 3's shards and gathers (null in every other mode); the step's collective program
  // check; the order of each step's collectives, steps and publishes (null: none).
  ParameterGather* parameter_gather() { return parts_->gather_.get(); }
  const ProgramCheck& program_check() const { return parts_->program; }
  void set_step_observer(StepObserver* observer) { parts_->set_observer(observer); }
  // The bench: the main thread's time in the schedule after backward (null: none).
  void set_phase_observer(PhaseObserver* observer) { phase_observer_ = observer; }

 private:
  // train_step.cpp: the parts of a step.
  void forward_micro_batch(std::int64_t step);
  void gradient_ready(int param_id);

  Config config_;
  World world_;
  TrainerOptions options_;
  TrainerSetup setup_;  // device, data, model, sampler, communicators
  Tracer tracer_;
  std::unique_ptr<ParameterShards> shards_;  // stage 3: the parameters (else null)
  std::unique_ptr<RankOptimizer> optimizer_;
  StepOptions step_options_;
  std::unique_ptr<StepParts> parts_;
  Tape tape_;
  std::unique_ptr<LayerTrace> layer_trace_;  // only when tracing
  LossWindow loss_window_;
  BatchLoader batches_;
  GradReadyHook grad_ready_hook_;        // gradient_ready
  GradWriteHook grad_write_hook_;       // stage 2: the gradient pool's wait (else empty)
  ParamUseHook param_use_hook_;         // the per-layer wait for a bucket's publish (or gather)
  ParamUseHook traced_param_use_hook_;  // the same inside the layer trace (when tracing)
  ParamUseHook backward_read_hook_;     // stage 3: backward's gather of a bucket (else empty)
  PhaseObserver* phase_observer_ = nullptr;

  StepScalars scalars_;  // of the step being run: the schedule steps buckets with them
  TrainingPosition position_;
  std::int64_t resumed_step_ = -1;  // TrainingState::resumed_step
  std::int64_t skipped_steps_ = 0;
  std::vector<std::int64_t> indices_;
};

}  // namespace zl
