// The memory one rank of a run needs, computed from the config before anything is allocated: the
// model's buffers as ModePlan's rank_memory counts them (parameters, gradients, masters, optimizer
// state; the one source of those figures, which the allocations must equal) plus the activations
// the tape keeps for a batch, in the precision's storage type. `zerolap plan` and the bench print
// it; the trainer refuses (exit 2, naming the figure and the key to change) a run that does not
// fit the node's available memory or the GPU's free memory, instead of being OOM-killed later.
#pragma once

#include <cstdint>
#include <string>

#include "models/parameter_store.h"
#include "runtime/config/config.h"
#include "runtime/train/plan/bucket_plan.h"
#include "runtime/train/plan/mode_plan.h"

namespace zl {

// The estimate of one rank (RankMemory with its activations): an estimate, as the tape's saved
// outputs and their gradients are counted per layer (Note [Activation estimate] in
// memory_estimate.cpp); buffers of a few batches of input, communication staging and the
// libraries' own memory are not.
// `layout`: the model's parameters (Model::parameter_layout, not allocated); `plan` and `mode`:
// the bucket plan and the mode and precision of the job (make_mode_plan of the config's
// [parallel], [optimizer] and [precision]), for `rank`'s share of masters and optimizer state.
RankMemory estimate_rank_memory(const Config& config, const ParameterStore& layout,
                                const BucketPlan& plan, const ModePlan& mode, int rank);
// The largest estimate over the plan's ranks.
RankMemory estimate_peak_rank_memory(const Config& config, const ParameterStore& layout,
                                     const BucketPlan& plan, const ModePlan& mode);

// "1.20 GiB (parameters 300.0 MiB, gradients ..., [master ...,] optimizer state ...,
// activations ...)"; the master only where a bf16 run keeps one.
std::string describe_memory(const RankMemory& m);

// The keys that lower `need` toward `per_rank` bytes, for "lower ...": the larger part first,
// model.widths for the buffers or the batch key of the larger activations (data.batch_size, or
// data.eval_batch_size when evaluation's are the larger), and the other too when it alone is
// above `per_rank`.
std::string keys_to_lower(const RankMemory& need, std::int64_t per_rank);

// What the node offers; negative: unknown (not checked).
struct AvailableMemory {
  std::int64_t host_bytes = -1;    // MemAvailable of /proc/meminfo
  std::int64_t device_bytes = -1;  // the GPU's free memory (cudaMemGetInfo), CUDA runs only
};
AvailableMemory available_memory(DeviceKind device);

// Throws UserError when `ranks_on_node` ranks of `need` do not fit `available` (on the host for a
// CPU run, on the GPU for a CUDA run), naming the figures and the key to change.
void check_memory_fits(const RankMemory& need, const Config& config, DeviceKind device,
                       const AvailableMemory& available, int ranks_on_node);

}  // namespace zl
