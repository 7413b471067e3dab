// The padded layout of element shards (see Note [Shard layout] in shard_layout.h).
#include "runtime/train/plan/shard_layout.h"

#include <fmt/format.h>

#include "base/errors.h"
#include "models/model.h"
#include "runtime/train/plan/collective_program.h"
#include "runtime/comm/backends/mpi_communicator.h"

namespace zl {

std::int64_t bucket_alignment(const ModePlan& mode, int world) {
  ZL_CHECK(world >= 1, "world size {}", world);
  if (!mode.element_shards) return ParameterStore::kAlignFloats;
  return ParameterStore::kAlignFloats * world;
}

int planned_ranks(const Config& config, const ModePlan& mode, int world) {
  if (mode.mode.shard_group > 0) return mode.mode.shard_group;
  return mode.element_shards && config.link.ranks > world ? config.link.ranks : world;
}

LayoutPadding shard_layout_padding(const ModePlan& mode, const BucketPlan& unpadded) {
  LayoutPadding padding;
  padding.multiple = bucket_alignment(mode, unpadded.world_size);
  if (!mode.element_shards) return padding;
  for (const Bucket& b : unpadded.buckets) padding.after.push_back(b.param_ids.back());
  return padding;
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

void check_trainable(const Config& config, const ModePlan& mode, int world) {
  const int ranks = planned_ranks(config, mode, world);
  if (ranks > world && !config.checkpoint.dir.empty()) {
    throw UserError(fmt::format(
        "{}: link.ranks = {} above the {} real ranks with parallel.collective = "
        "\"reduce_scatter_allgather\" is a timing study (each rank steps only the shard it would "
        "own among {}; the parameters are not trained), so it writes no checkpoints: unset "
        "checkpoint.dir or link.ranks",
        config.source_path, ranks, world, ranks));
  }
}

void check_shard_group(const Config& config, int world) {
  const int group = config.parallel.shard_group;
  if (group == 0) return;
  const int modelled = config.link.ranks;  // the timing study models more replicas
  if (world % group == 0 && modelled > world && modelled % group != 0) {
    throw UserError(fmt::format(
        "{}: parallel.shard_group = {} does not divide link.ranks = {}, the ranks the link "
        "model times this job as: set link.ranks to a multiple of {}",
        config.source_path, group, modelled, group));
  }
  if (world % group == 0) return;
  throw UserError(fmt::format(
      "{}: parallel.shard_group = {} does not divide the {} rank{} of this job, which split into "
      "groups of that many consecutive ranks: set a divisor of {} (or 0 for one group of every "
      "rank)",
      config.source_path, group, world, world == 1 ? "" : "s", world));
}

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
    const ParameterInfo* largest = &planned.layout.info(b.param_ids.front());
    for (const int id : b.param_ids) {
      if (planned.layout.info(id).numel > largest->numel) largest = &planned.layout.info(id);
    }
    throw UserError(fmt::format(
        "{}: bucket {} (its largest parameter {}: {} elements) would move {} elements per rank "
        "in one {}, more than one MPI call takes on the CPU ({}), and a bucket never splits a "
        "layer: lower model.widths, run on CUDA (runtime.device = \"cuda\"){}",
        config.source_path, b.index, largest->name, largest->numel, count,
        collective_name(c.op), kMaxMpiCount,
        per_shard ? ", or shard it over more ranks"
                  : ", or shard it element-wise (parallel.mode = \"zero\", parallel.collective "
                    "= \"reduce_scatter_allgather\") over enough ranks"));
  }
}

}  // namespace zl
