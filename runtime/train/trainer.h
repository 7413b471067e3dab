// The training state of one rank and its step: sampler -> forward -> loss -> backward (with the
// reducer's hooks) -> the mode's step policy, and sharded evaluation. A Trainer owns everything of
// a run except the world: model, data, communicators, bucket plan, optimizer and data-parallel
// step. Every rank constructs it with the same config (collective). The run loop (logging,
// evaluation and checkpoint cadence) is runtime/cli/training_run.h.
//
// Note [Epochs and accumulation]: an optimizer step takes train.grad_accum micro-batches, all of
// one epoch. When fewer than grad_accum are left in the current epoch, they are skipped, as a
// data loader with drop_last drops a partial batch. So an epoch is exactly steps_per_epoch()
// steps, `train.epochs = E` makes E passes that each start at the epoch's first batch, the epoch
// the metrics report is the sampler's, and A micro-batches of B samples take the same samples as
// one batch of A*B (floor(floor(N/B)/A) = floor(N/(A*B)); tested across epoch boundaries).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/device_buffer.h"
#include "data/dataset.h"
#include "models/model.h"
#include "data/sampler.h"
#include "models/tape.h"
#include "runtime/train/bucket_plan.h"
#include "runtime/comm/communicator.h"
#include "runtime/config/config.h"
#include "runtime/comm/device.h"
#include "runtime/trace/layer_trace.h"
#include "runtime/train/data_parallel_step.h"
#include "runtime/train/loss_window.h"
#include "runtime/train/mode_plan.h"
#include "runtime/train/sharded_optimizer.h"
#include "runtime/train/step_verdict.h"
#include "runtime/train/training_state.h"
#include "base/tracer.h"
#include "runtime/comm/world.h"

namespace zl {

struct EvalResult {
  double loss = 0.0;      // mean over the test set
  double accuracy = 0.0;  // fraction in [0, 1]; 0 for regression
  std::int64_t samples = 0;
};

struct TrainerOptions {
  bool quiet = false;  // no progress lines (tests)
  bool write_outputs = true;  // metrics file, effective config
  // Applied to each communicator after the [link] model (the bench wraps them in a
  // ComputeOnlyCommunicator to time a mode without communication). Empty: none.
  std::function<std::unique_ptr<Communicator>(std::unique_ptr<Communicator>)> wrap_comm;
  // Tests: when steps are checked for non-finite values; unset: as the config and device say
  // (docs/design.md, "Divergence").
  std::optional<StepCheck> step_check;
};

// Wall time of the phases of train_step() on the main thread, summed over steps (the bench).
// Overlap modes: forward includes waits for broadcasts, finish_backward the mode's step policy.
struct PhaseSeconds {
  double forward = 0.0, backward = 0.0, finish_backward = 0.0;
};

// What the steps since Trainer::reset_step_stats() did, in one snapshot (the bench reads this
// instead of reaching into the communicators, the optimizer and the tracer). Take it after
// synchronize(): the timeline's device marks must have been reached.
struct StepStats {
  PhaseSeconds host;               // main-thread wall time of the phases
  double optimizer_host_s = 0.0;   // host time in the fused optimizer calls (enqueue time on CUDA)
  CommStats reduce, broadcast;     // the two communicators' counters
  std::int64_t optimizer_state_bytes = 0;
  RankMemory allocated;  // Trainer::allocated_memory()
  // Every stream's spans since the reset (base/stream_timeline.h), seconds since the reset, and
  // the tracer's clock at that origin (to place device spans in the Chrome trace).
  std::vector<TimelineSpan> timeline;
  double timeline_origin_us = 0.0;
  nlohmann::json trace_events;  // the tracer's events since the reset (empty when not tracing)
};

class Trainer {
 public:
  Trainer(const Config& config, const World& world, TrainerOptions options = {});
  ~Trainer();

  // One optimizer step (grad_accum micro-batches). Its loss statistics join the window take_loss()
  // returns; on CUDA no micro-batch reads anything back (docs/design.md, "Data flow of one step").
  // A step found non-finite (every rank agrees; docs/design.md, "Divergence") throws NonfiniteStop
  // under train.on_nonfinite = "stop", or under "skip_step" changes nothing but the data position
  // and the step counter, and its loss stays out of the window.
  void train_step();
  StepCheck step_check() const { return step_check_; }
  std::int64_t skipped_steps() const { return skipped_steps_; }
  // StepCheck::EveryLogWindow: this rank's part of a window's check, the sum of squares of its
  // parameters (one read-back; 0 under EveryStep). Add it over ranks with the window's loss.
  double window_check_value();
  // Throws NonfiniteStop when the window (steps first..last) summed over ranks is not finite.
  void check_window(double loss_sum, double check_value, std::int64_t first_step,
                    std::int64_t last_step) const;
  // This rank's loss statistics since the last call (one read-back on CUDA), summed over steps.
  StepLoss take_loss() { return loss_window_.take(); }
  // Evaluates on the test split, sharded over ranks; every rank gets the reduced result.
  EvalResult evaluate();
  // Waits until all in-flight collectives, steps and broadcasts are done.
  void synchronize() { data_parallel_->synchronize(); }

  const Config& config() const { return config_; }
  const World& world() const { return world_; }
  Model& model() { return *model_; }
  const BucketPlan& plan() const { return plan_; }
  ShardedOptimizer& optimizer() { return *optimizer_; }
  const ModePlan& mode_plan() const { return mode_plan_; }
  // Where the model computes: the device's compute stream, with the run's GEMM math (tf32) and
  // host-wait limit.
  const ExecContext& compute_context() const { return compute_; }
  // What this rank allocated for the model's buffers, in the terms of ModePlan's rank_memory
  // (which `zerolap plan`, the memory check and the bench print; tested equal): the flat
  // parameters and gradients (with the bf16 wire buffer), the optimizer's masters and state.
  RankMemory allocated_memory() const;
  // Tests: the order of each step's collectives, steps and broadcasts (null: none).
  void set_step_observer(StepObserver* observer) { data_parallel_->set_observer(observer); }
  Communicator& reduce_comm() { return *reduce_comm_; }
  Communicator& broadcast_comm() { return *broadcast_comm_; }
  Tracer& tracer() { return tracer_; }
  const PhaseSeconds& phase_seconds() const { return phase_seconds_; }
  void reset_phase_seconds() { phase_seconds_ = PhaseSeconds{}; }
  // Waits for in-flight work, then returns a view of the state a checkpoint saves and restores.
  TrainingState state();
  // Sums over ranks of `values` (collective, in host memory).
  std::vector<double> sum_over_ranks(std::vector<double> values);
  TaskKind task() const { return data_.train.task; }
  double last_grad_norm() const { return data_parallel_->last_grad_norm(); }
  // Bytes of the bf16 gradient wire buffer (precision.reduce_dtype = "bf16"; else 0).
  std::int64_t gradient_wire_bytes() const { return data_parallel_->wire_bytes(); }
  // Zeroes every counter of StepStats and starts the stream timeline (call with nothing in
  // flight: after synchronize()); step_stats() stops it and returns the snapshot.
  void reset_step_stats();
  StepStats step_stats();
  std::int64_t step() const { return position_.step; }  // optimizer steps completed
  std::int64_t total_steps() const { return total_steps_; }
  std::int64_t steps_per_epoch() const { return steps_per_epoch_; }
  // The sampler position: micro-batches consumed, or skipped at an epoch's end (Note [Epochs and
  // accumulation]); checkpoints store it.
  std::int64_t batch_cursor() const { return position_.cursor; }
  // Micro-batches (global batches of the sampler) per epoch; checkpoints store it with the cursor.
  std::int64_t batches_per_epoch() const { return sampler_->steps_per_epoch(); }
  const TrainerOptions& options() const { return options_; }

 private:
  // Datasets, model, sampler and steps per epoch (UserError on bad data or shapes).
  void load_data_and_model();
  std::int64_t micro_batch_loss(const std::vector<std::int64_t>& indices);
  // The gathered host batch where the model reads it: the host buffers themselves on the CPU;
  // on CUDA device copies enqueued on the compute stream (ordered after the previous batch's use).
  struct BatchOnDevice {
    float* x;
    const std::int32_t* labels;
    const float* targets;
  };
  BatchOnDevice batch_on_device(bool classification);

  Config config_;
  World world_;
  TrainerOptions options_;
  Device device_;  // before everything that lives on it
  ExecContext compute_;
  Tracer tracer_;
  ModePlan mode_plan_;  // derived once from the config
  DatasetSplits data_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<DistributedSampler> sampler_;
  std::unique_ptr<Communicator> reduce_comm_;
  std::unique_ptr<Communicator> broadcast_comm_;
  BucketPlan plan_;
  std::unique_ptr<ShardedOptimizer> optimizer_;
  std::unique_ptr<DataParallelStep> data_parallel_;
  Tape tape_;
  std::unique_ptr<LayerTrace> layer_trace_;  // only when tracing
  PhaseSeconds phase_seconds_;
  LossWindow loss_window_;
  StepCheck step_check_ = StepCheck::EveryStep;
  std::int64_t skipped_steps_ = 0;
  double timeline_origin_us_ = 0.0;

  std::int64_t steps_per_epoch_ = 0;  // optimizer steps
  std::int64_t total_steps_ = 0;
  TrainingPosition position_;
  std::int64_t resumed_step_ = -1;  // TrainingState::resumed_step
  std::vector<std::int64_t> indices_;
  std::vector<float> host_x_, host_targets_;
  std::vector<std::int32_t> host_labels_;
  DeviceBuffer device_x_, device_targets_, device_labels_;  // used when the model is on a GPU
};

}  // namespace zl
