// The memory one rank of a run needs, computed from the config before anything is allocated:
// parameters, gradients, its optimizer state (ModePlan::state_bytes) and the activations the tape
// keeps for a batch. `zerolap plan` prints it; the trainer refuses (exit 2, naming the figure and
// the key to change) a run that does not fit the node's available memory or the GPU's free memory,
// instead of being OOM-killed minutes later. The bytes per element of each buffer kind are in
// ElementSizes, in one place, so a change of precision changes them here.
#pragma once

#include <cstdint>
#include <string>

#include "models/parameter_store.h"
#include "runtime/config/config.h"
#include "runtime/train/bucket_plan.h"
#include "runtime/train/mode_plan.h"

namespace zl {

// Bytes per element of each kind of buffer a run allocates (fp32 throughout today).
struct ElementSizes {
  int parameter = 4;
  int gradient = 4;
  int optimizer_state = 4;
  int activation = 4;
};
ElementSizes element_sizes(const Config& config);

// Bytes on one rank. An estimate: the tape's saved outputs and their gradients are counted per
// layer (Note [Activation estimate] in memory_estimate.cpp); buffers of a few batches of input,
// communication staging and the libraries' own memory are not.
struct MemoryEstimate {
  std::int64_t parameters = 0;
  std::int64_t gradients = 0;
  std::int64_t optimizer_state = 0;
  std::int64_t activations = 0;
  bool eval_activations = false;  // the evaluation batch, not the training batch, sets them
  std::int64_t total() const { return parameters + gradients + optimizer_state + activations; }
};

// `layout`: the model's parameters (Model::parameter_layout, not allocated); `plan` and `mode`:
// the bucket plan and mode of the job, for `rank`'s share of the optimizer state.
MemoryEstimate estimate_rank_memory(const Config& config, const ParameterStore& layout,
                                    const BucketPlan& plan, const ModePlan& mode, int rank);
// The largest estimate over the plan's ranks.
MemoryEstimate estimate_peak_rank_memory(const Config& config, const ParameterStore& layout,
                                         const BucketPlan& plan, const ModePlan& mode);

// "1.20 GiB (parameters 300.0 MiB, gradients ..., optimizer state ..., activations ...)".
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
