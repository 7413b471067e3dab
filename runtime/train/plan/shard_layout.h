// The layout of ZeRO's element shards (parallel.collective = "reduce_scatter_allgather"): every
// bucket padded so that it splits into `world` equal shards whose length is a multiple of
// ParameterStore::kAlignFloats (16) elements, rank r owning shard r of every bucket
// (docs/design.md, "Element shards").
//
// Note [Shard layout]: the padding goes after each bucket's last parameter in the flat layout
// (LayoutPadding, models/parameter_store.h), so a bucket stays one contiguous slice of the
// parameters and gradients and its reduce-scatter and all-gather run in place on it; a shard
// starts 64-byte aligned in an fp32 buffer and 32-byte aligned in a bf16 one. Where buckets are
// cut does not depend on offsets (only on parameter sizes and the caps, Note [Bucket order]), so
// the plan of the padded layout has the same buckets as the unpadded one. A parameter may
// straddle two shards: the fused optimizer steps and the sum of squares are element-wise, so
// each rank stepping its part is exactly the whole parameter stepped. Padding is zero, stays zero
// (a zero gradient steps a zero parameter and zero state to zero), adds nothing to the norm, and
// is in no checkpoint (those store parameters by name).
#pragma once

#include "models/parameter_store.h"
#include "runtime/config/config.h"
#include "runtime/train/plan/bucket_plan.h"
#include "runtime/train/plan/mode_plan.h"

namespace zl {

// The ranks a run of `mode` on `world` real ranks lays out and steps for: the shard group
// (hybrid sharding: shards inside a group), link.ranks = N above `world` with element shards
// (the timing study, runtime/comm/link/shard_study.h), else `world`.
int planned_ranks(const Config& config, const ModePlan& mode, int world);

// A model's layout as a run of `mode` on `world` ranks allocates it, and its bucket plan.
struct PlannedLayout {
  LayoutPadding padding;  // what Model's constructor takes to allocate this layout
  ParameterStore layout;  // laid out with `padding`, not allocated
  BucketPlan plan;        // of `layout`
};
PlannedLayout plan_layout(const ModelSpec& spec, const ParallelConfig& parallel,
                          const ModePlan& mode, int world);
// The same with the caps of `parallel` replaced (the bench sweeps bucket_cap_mb).
PlannedLayout plan_layout(const ModelSpec& spec, const ParallelConfig& parallel,
                          const ModePlan& mode, int world, double cap_mb);

}  // namespace zl
