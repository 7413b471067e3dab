// The optimizer of a data-parallel run: the LR schedule, the step count, and optimizer state for
// the buckets this rank steps — every bucket in ddp, the assigned ones in zero (docs/design.md
// invariant 5: state per rank ~ total / world size). State is one flat buffer per owned bucket
// (the fused kernel makes one pass over the bucket's slice) and addressable per parameter, so
// checkpoints store it by parameter name and can be resharded to another bucket plan.
// bf16 parameters (docs/design.md "Precision"): each stepped bucket also keeps its fp32 masters
// (4 B per element) or their int16 remainders (2 B), exactly ModePlan::master_bytes; the step
// writes the bf16 parameter straight into the store's parameter buffer, which the broadcast (or
// all-gather) sends. With element shards (docs/design.md, "Element shards") every rank keeps
// state and masters for its shard of every bucket and steps only that.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/device_buffer.h"
#include "base/dtype.h"
#include "base/exec_context.h"
#include "kernels/optim_math.h"
#include "models/parameter_store.h"
#include "runtime/train/plan/bucket_plan.h"
#include "runtime/train/plan/mode_plan.h"
#include "runtime/config/config.h"

namespace zl {

struct ParameterShards;

// The scalars of one optimizer step, fixed on the main thread before any bucket is stepped (in
// interleaved mode buckets are stepped on the comm thread while the main thread moves on).
struct StepScalars {
  std::int64_t t = 0;      // step count, from 1
  float lr = 0.0f;         // after the schedule
  float grad_scale = 1.0f;  // 1 / (world size * grad_accum) * clip coefficient
};

// A bucket's reduced gradients as the step reads them: elements of `dtype` from the first one
// stepped (the store's fp32 gradients, the bf16 reduce buffer with reduce_dtype = "bf16", or
// stage 2's fp32 gradient shard).
struct BucketGradient {
  const void* data = nullptr;
  DType dtype = DType::F32;
};

// Learning rate at step t (from 1): linear warm-up over warmup_steps, then constant or cosine
// decay towards min_lr as torch's CosineAnnealingLR (step t after warm-up at progress
// (t - warmup - 1) / (total_steps - warmup): lr first, min_lr reached after the last step).
float scheduled_lr(const OptimizerConfig& config, std::int64_t t, std::int64_t total_steps);

class RankOptimizer {
 public:
  // `initial`: the fp32 values the store's parameters were initialised from
  // (Model::initial_values); required for a bf16 store, whose masters start from those of their
  // ranges exactly (the bf16 parameters must be master_to_bf16 of them), ignored for fp32.
  // `shards`: where the stepped parameters live with ParamStorage::Gathered (ZeRO stage 3,
  // runtime/train/step/parameter_gather.h); null for a flat store, whose buffer holds them.
  RankOptimizer(const OptimizerConfig& config, const BucketPlan& plan, ParameterStore& store,
                int rank, const ModePlan& mode, std::int64_t total_steps,
                const InitialValues& initial = {}, ParameterShards* shards = nullptr);

  const OptimizerConfig& config() const { return config_; }
  bool owns(int bucket) const { return at(bucket).owned; }
  // The elements of `bucket` this rank steps (ModePlan::stepped_range): the whole bucket, or with
  // element shards this rank's shard of it; numel 0 where it steps nothing.
  const ElementRange& stepped(int bucket) const { return at(bucket).range; }

  // Advances the step count and fixes this step's scalars (clip coefficient applied later by
  // the caller through grad_scale).
  StepScalars next_step(float grad_scale);
  std::int64_t step_count() const { return t_; }
  void set_step_count(std::int64_t t) { t_ = t; }
  // The run's length, which the LR schedule decays over (a resume may change it: TrainingState).
  void set_total_steps(std::int64_t total_steps) { total_steps_ = total_steps; }

  // The fused update of the stepped part of bucket b (stepped(b)): reads p (or its master), the
  // reduced gradient `grad` (pointing at stepped(b)'s first element; bf16 gradients need bf16
  // parameters) and the state; writes p, its master and state. Runs on `exec` (the main thread /
  // compute stream, or the comm thread / comm stream in interleaved mode).
  void step_bucket(int bucket, const StepScalars& scalars, const ExecContext& exec,
                   const BucketGradient& grad);

  // Names of the per-element state tensors (optimizer_state_names).
  const std::vector<std::string>& state_names() const { return state_names_; }
  // Parameter `param_id`'s state tensor `which` (index into state_names), or null when this rank
  // does not step the whole parameter (its bucket is another rank's, or with element shards the
  // parameter is not inside this rank's shard: use state_at).
  float* param_state(int param_id, int which);
  // State tensor `which` at flat element `element` of `bucket`, which must lie in stepped(bucket).
  float* state_at(int bucket, int which, std::int64_t element);
  std::int64_t state_bytes() const;  // allocated on this rank

  // Master weights (bf16 parameters only; an fp32 store's parameters are their own masters).
  bool has_masters() const { return store_.param_dtype() == DType::BF16; }
  // Allocated on this rank: ModePlan::master_bytes.
  std::int64_t master_bytes() const;
  // out (the parameter's numel, host) = its fp32 master: the fp32 master, or the bf16 parameter
  // joined with its remainder (for an fp32 store: the parameter). Only on a rank that steps the
  // parameter's bucket (InternalError otherwise); blocking, call with nothing in flight.
  void read_master(int param_id, float* out) const;
  // Sets the parameter's master (or remainder) to `values` (numel, host) and its bf16 parameter to
  // master_to_bf16 of them (fp32 store: the parameter to the values). Same conditions as
  // read_master.
  void write_master(int param_id, const float* values);
  // The same for flat elements `range` of `bucket`, inside stepped(bucket) (element shards: a
  // shard holds parts of parameters). Padding inside the range reads as zero and must be written
  // zero.
  void read_master_range(int bucket, const ElementRange& range, float* out) const;
  void write_master_range(int bucket, const ElementRange& range, const float* values);

 private:
  // What this rank keeps to step one bucket; `owned` false, and the rest empty, where it steps
  // none of it.
  struct SteppedBucket {
    bool owned = false;
    ElementRange range;          // stepped(bucket)
    char* param_base = nullptr;  // where range's parameters start (in the store or a shard)
    std::vector<DeviceBuffer> state;  // [which], of range.numel elements; none for plain SGD
    // fp32 masters (F32) or int16 remainders (held in a 2-byte BF16 buffer, reinterpreted); empty
    // without masters.
    DeviceBuffer master;
  };
  SteppedBucket& at(int bucket) { return buckets_[static_cast<std::size_t>(bucket)]; }
  const SteppedBucket& at(int bucket) const { return buckets_[static_cast<std::size_t>(bucket)]; }

  // The bucket holding param_id, checked to be stepped here (the whole parameter); `what` names
  // the caller.
  int stepped_bucket_of(int param_id, const char* what) const;
  // Checks that `range` lies in stepped(bucket); returns its first element's index there.
  std::int64_t index_in_stepped(int bucket, const ElementRange& range, const char* what) const;
  // The parameter at stepped(bucket)'s element `within` (as T: the store's dtype).
  template <class T>
  T* param_at(int bucket, std::int64_t within) const {
    return reinterpret_cast<T*>(at(bucket).param_base) + within;
  }

  OptimizerConfig config_;
  const BucketPlan& plan_;
  ParameterStore& store_;
  std::int64_t total_steps_;
  std::int64_t t_ = 0;
  MasterWeights master_weights_;
  std::vector<std::string> state_names_;
  std::vector<SteppedBucket> buckets_;  // [bucket]
};

}  // namespace zl
