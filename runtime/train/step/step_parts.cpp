// StepParts: the reduce buffer, reducer, bucket primitives and schedule of a step (step_parts.h).
#include "runtime/train/step/step_parts.h"

#include <algorithm>

#include "base/errors.h"
#include "runtime/comm/backends/device.h"

namespace zl {

StepParts::StepParts(const ModePlan& mode, const StepOptions& options, const BucketPlan& plan,
                     ParameterStore& store, RankOptimizer& optimizer, const StepComms& comms,
                     ExecContext compute, Tracer* tracer, const ParameterShards* shards)
    : comms(comms),
      program(collective_program(mode, plan)),
      context{mode, plan, store, program, compute, tracer},
      gradients(context, comms.reduce.rank()),
      reducer(context, gradients, comms.reduce, comms.replica),
      buckets(context, gradients, optimizer, comms.broadcast, reducer.reduced_on().name()) {
  ZL_CHECK(mode.param_dtype == store.param_dtype(), "a {} mode plan for a {} parameter store",
           dtype_name(mode.param_dtype), dtype_name(store.param_dtype()));
  assert_valid(options, mode);
  schedule = make_schedule(ScheduleParts{.step = context,
                                         .reducer = reducer,
                                         .buckets = buckets,
                                         .every_rank = comms.every_rank(),
                                         .options = options});
  if (mode.gathers_parameters()) {
    ZL_CHECK(shards, "{} gathers parameter shards, and none were given", mode.name());
    gather_ = std::make_unique<ParameterGather>(context, *shards, buckets, comms.broadcast);
  }
}

void StepParts::broadcast_initial_parameters() {
  // Stage 3: every rank's shards start from the same seeded values; there is no flat buffer.
  if (context.mode.gathers_parameters()) return;
  // In chunks: one MPI call counts elements in an int. In the store's dtype (bf16: the rounded
  // parameters; every rank's masters start from the same seeded fp32 values, which these are
  // master_to_bf16 of).
  constexpr std::int64_t kChunk = std::int64_t{1} << 30;
  ParameterStore& store = context.store;
  const DType dtype = store.param_dtype();
  auto* params = static_cast<char*>(store.raw_data());
  Work last;
  for (std::int64_t offset = 0; offset < store.total_numel(); offset += kChunk) {
    last = comms.broadcast.broadcast(params + offset * dtype_size(dtype),
                                     std::min(kChunk, store.total_numel() - offset), dtype, 0);
  }
  last.wait();  // stream order: every earlier chunk is done too
}

void StepParts::synchronize() {
  buckets.wait_for_all_parameters();
  if (context.mode.gathers_parameters()) gather().release_all();
  comms.reduce.synchronize();
  if (comms.replica) comms.replica->synchronize();
  comms.broadcast.synchronize();
  // CUDA: steps (ddp, none, after_backward) and forward waits live on the compute stream. It can
  // only be waiting for collectives that just completed, so this wait cannot hang.
  synchronize_stream(context.compute);
}

}  // namespace zl
