// The padded layout of element shards (see Note [Shard layout] in shard_layout.h).
#include "runtime/train/plan/shard_layout.h"

#include "base/errors.h"
#include "models/model.h"

namespace zl {

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
  // With element shards: after each bucket's last parameter, rounded up to kAlignFloats x the
  // world; else none beyond each parameter's own alignment.
  out.padding.multiple = ParameterStore::kAlignFloats * (mode.element_shards ? world : 1);
  if (mode.element_shards) {
    for (const Bucket& b : unpadded_plan.buckets) out.padding.after.push_back(b.param_ids.back());
  }
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
