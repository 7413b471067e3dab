// The padded layout of element shards (see Note [Shard layout] in shard_layout.h).
#include "runtime/train/plan/shard_layout.h"

#include "base/errors.h"
#include "models/model.h"

namespace zl {

namespace {

// The layout padding of `mode` for the buckets of `unpadded` (a plan of the unpadded layout):
// after each bucket's last parameter, rounded up to kAlignFloats x the world with element shards;
// else empty, kAlignFloats (each parameter's own alignment: no extra).
LayoutPadding shard_layout_padding(const ModePlan& mode, const BucketPlan& unpadded) {
  LayoutPadding padding;
  padding.multiple = ParameterStore::kAlignFloats * (mode.element_shards ? unpadded.world_size : 1);
  if (!mode.element_shards) return padding;
  for (const Bucket& b : unpadded.buckets) padding.after.push_back(b.param_ids.back());
  return padding;
}

}  // namespace

int planned_ranks(const Config& config, const ModePlan& mode, int world) {
  if (mode.mode.shard_group > 0) return mode.mode.shard_group;
  return mode.element_shards && config.link.ranks > world ? config.link.ranks : world;
}

PlannedLayout plan_layout(const ModelSpec& spec, const ParallelConfig& parallel,
                          const ModePlan& mode, int world, double cap_mb) {
  const ParameterStore unpadded = Model::parameter_layout(spec);
  const BucketPlan unpadded_plan = build_bucket_plan(unpadded, cap_mb, parallel.first_bucket_cap_mb,
                                                     world, parallel.assignment);
  PlannedLayout out;
  out.padding = shard_layout_padding(mode, unpadded_plan);
  out.layout = Model::parameter_layout(spec, out.padding);
  out.plan = build_bucket_plan(out.layout, cap_mb, parallel.first_bucket_cap_mb, world,
                               parallel.assignment);
  // The same buckets, each a multiple of the alignment (Note [Shard layout]).
  ZL_CHECK(out.plan.buckets.size() == unpadded_plan.buckets.size(),
           "the padded layout has {} buckets, the unpadded {}", out.plan.buckets.size(),
           unpadded_plan.buckets.size());
  for (const Bucket& b : out.plan.buckets) {
    ZL_CHECK(b.numel % out.padding.multiple == 0,
             "bucket {} of {} elements is not a multiple of {}", b.index, b.numel,
             out.padding.multiple);
  }
  return out;
}

PlannedLayout plan_layout(const ModelSpec& spec, const ParallelConfig& parallel,
                          const ModePlan& mode, int world) {
  return plan_layout(spec, parallel, mode, world, parallel.bucket_cap_mb);
}

}  // namespace zl
