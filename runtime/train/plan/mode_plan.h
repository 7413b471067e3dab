// ModePlan: the facts of one parallel mode (runtime/config/mode.h), derived once from its Mode
// value and the config. Which collective a bucket's gradients take, what publishes the stepped
// parameters, where the gradients and parameters live (the parts the step is made of), where the
// optimizer state lives and how much of it, when the step runs. The schedules, the optimizer,
// `zerolap plan`, the bench and checkpoints read these facts here instead of re-deriving them
// (docs/design.md "Modes" has the table); the collectives of one step are its collective program
// (collective_program.h).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/comm/communicator.h"
#include "runtime/config/config.h"
#include "runtime/config/mode.h"
#include "runtime/train/plan/bucket_plan.h"

namespace zl {

// When a bucket's optimizer step runs relative to backward (one schedule each, schedule.h; the
// config names zero's schedule parallel.overlap).
enum class ScheduleKind {
  Ddp,                // after backward, every rank steps every bucket
  ZeroNone,           // after backward: owned steps, every broadcast, wait for them
  ZeroAfterBackward,  // after backward, per bucket in order: wait, step if owned, broadcast
  ZeroInterleaved,    // in the completion callback of the bucket's collective, during backward
};

// Elements [offset, offset + numel) of the flat buffers.
struct ElementRange {
  std::int64_t offset = 0;
  std::int64_t numel = 0;
  std::int64_t end() const { return offset + numel; }
  // Whether `inner` lies within this range.
  bool contains(const ElementRange& inner) const {
    return inner.offset >= offset && inner.numel >= 0 && inner.end() <= end();
  }
};

// The buffers of stage 2's gradient pool (Note [Gradient pool]), each of the largest bucket: the
// bucket backward is writing and the one being reduce-scattered, as DeepSpeed's double buffer.
inline constexpr int kGradientPoolBuffers = 2;

// Where a step's gradients are reduced from and read by the step and the norm (gradient_store.h):
// the store's fp32 buffer in place, its bf16 cast (reduce_dtype = "bf16"), or stage 2's pool
// accumulating into the rank's fp32 shard (stages 2 and 3).
enum class GradientStoreKind { Fp32, Bf16Wire, ShardPool };

struct ModePlan {
  Mode mode;
  ScheduleKind schedule = ScheduleKind::Ddp;
  GradientStoreKind gradient_store = GradientStoreKind::Fp32;
  // The gradients' collective: AllReduce, Reduce to the bucket's assigned rank, or ReduceScatter
  // (element shards).
  CollectiveOp bucket_collective = CollectiveOp::AllReduce;
  // zero: the stepped parameters go to every rank after each bucket's step - broadcast from the
  // assigned rank, or all-gathered from every rank's shard (parameter_collective).
  bool broadcast_after_step = false;
  CollectiveOp parameter_collective = CollectiveOp::Broadcast;
  // zero: optimizer state and the step of a bucket live on its assigned rank only, or (element
  // shards) shard r of every bucket on rank r; ddp: everything on every rank (docs/design.md
  // invariant 5).
  bool sharded_state = false;
  // collective = "reduce_scatter_allgather": every bucket is padded to split into `world` equal
  // shards of a multiple of 16 elements (runtime/train/plan/shard_layout.h), rank r owns shard r.
  bool element_shards = false;
  // Stage 3 (runtime/train/step/parameter_gather.h): parallel.prefetch and
  // parallel.reshard_after_forward.
  int prefetch = 1;
  bool reshard_after_forward = true;
  // Hybrid sharding (Mode::shard_group G below the world; make_run_mode_plan): the copies of
  // every shard, one per group of G ranks. Each bucket's reduced shard is all-reduced across them
  // once per step on the replica communicator. 1: flat (no such communicator).
  int replicas = 1;
  // train.grad_accum (make_run_mode_plan; 1 from make_mode_plan): stages 2 and 3 reduce-scatter
  // every bucket in every micro-batch, and stage 3 gathers in each micro-batch's forward and
  // backward; the other modes accumulate locally and reduce once, in the last.
  int micro_batches = 1;
  // A clip norm needs every bucket reduced before any step; interleaved steps earlier.
  bool can_clip = true;
  int state_floats_per_element = 0;  // Adam/AdamW 2, SGD with momentum 1, plain SGD 0
  // Precision (docs/design.md "Precision"). The parameters forward/backward read and the
  // broadcast sends are param_dtype; gradients accumulate in fp32 and travel as reduce_dtype
  // (bf16: cast into a reduce buffer of 2 bytes per element first); with bf16 parameters the rank
  // that steps a bucket keeps fp32 masters, or their int16 remainders.
  DType param_dtype = DType::F32;
  DType reduce_dtype = DType::F32;
  MasterWeights master_weights = MasterWeights::Fp32;

  // Mode::name: "ddp" or "zero/<overlap>/<collective>", as the bench and logs name modes.
  std::string name() const { return mode.name(); }
  // Stage 3: each rank keeps only its shard of the parameters; forward and backward all-gather a
  // bucket into a gather buffer where they need it (parameter_gather.h) instead of reading the
  // store's flat buffer, and no all-gather follows the step.
  bool gathers_parameters() const { return element_shards && mode.stage == 3; }
  // Stages 2 and 3: gradients reduce-scattered every micro-batch into the rank's shard.
  bool pools_gradients() const { return gradient_store == GradientStoreKind::ShardPool; }
  // Stage 3: the gather buffers (of the largest bucket) a rank allocates: with
  // reshard_after_forward one per bucket the forward or backward holds at once, the one in use
  // and `prefetch` ahead; without it every bucket's, kept from forward to backward.
  std::int64_t gather_buffers(const BucketPlan& plan) const;
  // Stages 2 and 3: the gradient pool's buffers (of the largest bucket), kGradientPoolBuffers or
  // one per bucket where there are fewer buckets; 0 in the other modes.
  std::int64_t pool_buffers(const BucketPlan& plan) const {
    if (!pools_gradients()) return 0;
    const auto buckets = static_cast<std::int64_t>(plan.buckets.size());
    return std::min<std::int64_t>(kGradientPoolBuffers, buckets);
  }
  // Gradient bytes per element: the fp32 gradient, and its bf16 cast with reduce_dtype bf16.
  int gradient_bytes_per_element() const { return reduce_dtype == DType::BF16 ? 6 : 4; }
  // Whether `rank` holds optimizer state of bucket `b` and steps (some of) it.
  bool steps_on(const Bucket& b, int rank) const {
    return !sharded_state || element_shards || b.assigned_rank == rank;
  }
  // The elements of bucket b that `rank` steps and keeps optimizer state (and masters) for: the
  // whole bucket (ddp; its assigned rank in bucket modes), shard `rank` (element shards), or none.
  // With a shard group (plan.world_size = G ranks lay out the shards) `rank` may be a world rank:
  // its member index rank mod G picks the shard.
  ElementRange stepped_range(const BucketPlan& plan, const Bucket& b, int rank) const;
  // Hybrid stages 2 and 3 with a bf16 wire: the replica all-reduce's bf16 buffer of the largest
  // shard, elements (the fp32 gradient shard is cast into it and back); 0 otherwise.
  std::int64_t replica_wire_numel(const BucketPlan& plan) const;
  // Elements `rank` steps over all buckets, and the buckets it steps a part of.
  std::int64_t stepped_numel(const BucketPlan& plan, int rank) const;
  int stepped_buckets(const BucketPlan& plan, int rank) const;
  // Optimizer-state bytes `rank` allocates: what `zerolap plan` prints and
  // RankOptimizer::state_bytes() must report.
  std::int64_t state_bytes(const BucketPlan& plan, int rank) const;
  // Master-weight bytes `rank` allocates (bf16 only: 4 or 2 per stepped element; fp32: 0, the
  // parameters are the masters).
  std::int64_t master_bytes(const BucketPlan& plan, int rank) const {
    return stepped_numel(plan, rank) * master_bytes_per_element();
  }
  int master_bytes_per_element() const;
};

// The balance of a plan: elements each rank steps (padding included: what it allocates), and the
// parameter elements among them (padding excluded), largest and smallest over ranks.
struct StepBalance {
  std::int64_t largest = 0, smallest = 0;                      // with padding
  std::int64_t largest_parameters = 0, smallest_parameters = 0;  // without
};
StepBalance step_balance(const ModePlan& mode, const BucketPlan& plan,
                         const ParameterStore& store);

// The plan of `mode` (stage 3 takes parallel.prefetch and reshard_after_forward from `parallel`).
ModePlan make_mode_plan(const Mode& mode, const ParallelConfig& parallel,
                        const OptimizerConfig& optimizer,
                        const PrecisionConfig& precision = PrecisionConfig{});
// The same for the mode of [parallel] (mode_of).
ModePlan make_mode_plan(const ParallelConfig& parallel, const OptimizerConfig& optimizer,
                        const PrecisionConfig& precision = PrecisionConfig{});
// The mode plan of a run of `config` on `world` ranks: make_mode_plan, train.grad_accum's
// micro_batches and the shard group's replicas (check_shard_group first).
ModePlan make_run_mode_plan(const Config& config, int world);

// The memory of one rank, in bytes: what it allocates for parameters, gradients, masters and
// optimizer state, from the bucket plan (rank_memory; `store_numel`: the parameter store's
// elements, padding included), plus the activations an estimate before the run adds
// (memory_estimate.h). The trainer's allocations must equal the buffers (tested); `zerolap plan`
// prints them. Gradients: the fp32 buffer of every element (plus the bf16 reduce buffer); stage 2
// instead the fp32 shard plus the pool, kGradientPoolBuffers (at most one per bucket) x the
// largest bucket x (4, + 2 for a bf16 wire).
struct RankMemory {
  std::int64_t parameters = 0, gradients = 0, master = 0, state = 0;
  std::int64_t gradient_pool = 0;   // stage 2: the part of `gradients` that is the pool
                                    // (and the replica all-reduce's bf16 buffer, if any)
  std::int64_t gather_buffers = 0;  // stage 3: the part of `parameters` that is gather buffers
  // The tape's activations for a batch (Note [Activation estimate]); 0 from rank_memory.
  std::int64_t activations = 0;
  bool eval_activations = false;  // the evaluation batch, not the training batch, sets them
  // The model's buffers: what rank_memory says and the trainer allocates.
  std::int64_t buffers() const { return parameters + gradients + master + state; }
  std::int64_t total() const { return buffers() + activations; }
};
RankMemory rank_memory(const ModePlan& mode, const BucketPlan& plan, std::int64_t store_numel,
                       int rank);
// Bytes per parameter element on one rank as a formula in d (the world size), from the mode's
// per-element sizes - parameters + gradients [+ bf16 wire] + master + optimizer state, the sharded
// parts over d: "2 + 4 + 12/d" for bf16 + fp32 master + Adam under zero with fp32 gradients,
// "2 + 16/d + pool" at stage 2. An even split; rank_memory counts the bucket plan's real one.
std::string bytes_per_parameter_formula(const ModePlan& mode);

// The precision as `zerolap plan` and the bench name it: "fp32", "tf32", "bf16 + fp32 master" or
// "bf16 + remainders" (reduce_dtype is named beside it).
std::string precision_label(const PrecisionConfig& precision);

// Names of the optimizer's per-element state tensors, as in torch.optim's state_dict:
// Adam/AdamW {"exp_avg", "exp_avg_sq"}, SGD with momentum {"momentum_buffer"}, else {}.
std::vector<std::string> optimizer_state_names(const OptimizerConfig& optimizer);

}  // namespace zl
