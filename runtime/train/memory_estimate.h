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
#include "runtime/train/bucket_plan.h"
#include "runtime/train/mode_plan.h"

namespace zl {

// Bytes on one rank. An estimate: the tape's saved outputs and their gradients are counted per
// layer (Note [Activation estimate] in memory_estimate.cpp); buffers of a few batches of input,
// communication staging and the libraries' own memory are not.
struct MemoryEstimate {
  std::int64_t parameters = 0;       // RankMemory::parameters
  std::int64_t gradients = 0;        // RankMemory::gradients (the bf16 reduce buffer included)
  std::int64_t master = 0;           // RankMemory::master (bf16 only)
  std::int64_t optimizer_state = 0;  // RankMemory::state
  std::int64_t activations = 0;
  bool eval_activations = false;  // the evaluation batch, not the training batch, sets them
  // The model's buffers: what ModePlan::rank_memory says and the trainer allocates.
  std::int64_t buffers() const { return parameters + gradients + master + optimizer_state; }
  std::int64_t total() const { return buffers() + activations; }
};

// `layout`: the model's parameters (Model::parameter_layout, not allocated); `plan` and `mode`:
// the bucket plan and the mode and precision of the job (make_mode_plan of the config's
// [parallel], [optimizer] and [precision]), for `rank`'s share of masters and optimizer state.
MemoryEstimate estimate_rank_memory(const Config& config, const ParameterStore& layout,
                                    const BucketPlan& plan, const ModePlan& mode, int rank);
// The largest estimate over the plan's ranks.
MemoryEstimate estimate_peak_rank_memory(const Config& config, const ParameterStore& layout,
                                         const BucketPlan& plan, const ModePlan& mode);

// "1.20 GiB (parameters 300.0 MiB, gradients ..., [master ...,] optimizer state ...,
// activations ...)"; the master only where a bf16 run keeps one.
std::string describe_memory(const MemoryEstimate& m);

// What the node offers; negative: unknown (not checked).
struct AvailableMemory {
  std::int64_t host_bytes = -1;    // MemAvailable of /proc/meminfo
  std::int64_t device_bytes = -1;  // the GPU's free memory (cudaMemGetInfo), CUDA runs only
};
AvailableMemory available_memory(DeviceKind device);

// Throws UserError when `ranks_on_node` ranks of `need` do not fit `available` (on the host for a
// CPU run, on the GPU for a CUDA run), naming the figures and the key to change.
void check_memory_fits(const MemoryEstimate& need, const Config& config, DeviceKind device,
                       const AvailableMemory& available, int ranks_on_node);

}  // namespace zl
