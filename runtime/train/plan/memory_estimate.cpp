// The per-rank memory estimate and the check against the node's memory (see memory_estimate.h).
#include "runtime/train/plan/memory_estimate.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "base/device_buffer.h"
#include "base/errors.h"
#include "runtime/train/plan/plan_report.h"

namespace zl {
namespace {

// Note [Activation estimate]: per sample, the tape keeps each layer's output, and backward
// writes a gradient of the same size; the elementwise activation keeps its input too. So an mlp
// layer of width w holds about 3w elements per training sample (2w in evaluation, which keeps no
// gradients), and a residual block of width d (LayerNorm, two Linears, an activation, the add)
// about 8d. The input batch is counted once.
std::int64_t activation_elements(const ModelSpec& spec, std::int64_t batch, bool training) {
  const std::int64_t per_output = training ? 3 : 2;
  const std::vector<std::int64_t>& w = spec.widths;
  std::int64_t per_sample = w.front();
  if (spec.kind == ModelKind::Mlp) {
    for (std::size_t i = 1; i < w.size(); ++i) per_sample += per_output * w[i];
  } else {
    const std::int64_t d = w[1];
    const auto blocks = static_cast<std::int64_t>(w.size()) - 3;
    const std::int64_t per_block = training ? 8 * d : 5 * d;
    per_sample += per_output * d + blocks * per_block + per_output * d + per_output * w.back();
  }
  return per_sample * batch;
}

std::int64_t read_mem_available() {
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    std::istringstream in(line);
    std::string key;
    std::int64_t kib = 0;
    if (in >> key >> kib && key == "MemAvailable:") return kib * 1024;
  }
  return -1;  // not Linux, or an old kernel: unknown
}

}  // namespace

RankMemory estimate_rank_memory(const Config& config, const ParameterStore& layout,
                                const BucketPlan& plan, const ModePlan& mode, int rank) {
  // The buffers from the one place that sizes them (the allocations are tested against it).
  RankMemory m = rank_memory(mode, plan, layout.total_numel(), rank);
  const std::int64_t train =
      activation_elements(config.model, config.data.batch_size, /*training=*/true);
  const std::int64_t eval =
      activation_elements(config.model, config.data.eval_batch_size, /*training=*/false);
  m.eval_activations = eval > train;
  // The tape stores activations and their gradients in the parameters' dtype (docs/design.md,
  // "Precision"); the fp32 LayerNorm statistics are a few floats per row and not counted.
  m.activations = std::max(train, eval) * dtype_size(mode.param_dtype);
  return m;
}

RankMemory estimate_peak_rank_memory(const Config& config, const ParameterStore& layout,
                                     const BucketPlan& plan, const ModePlan& mode) {
  RankMemory peak;
  for (int r = 0; r < plan.world_size; ++r) {
    const RankMemory m = estimate_rank_memory(config, layout, plan, mode, r);
    if (r == 0 || m.total() > peak.total()) peak = m;
  }
  return peak;
}

std::string describe_memory(const RankMemory& m) {
  return fmt::format("{} (parameters {}, gradients {}, {}optimizer state {}, activations {})",
                     human_bytes(m.total()), human_bytes(m.parameters), human_bytes(m.gradients),
                     m.master > 0 ? fmt::format("master {}, ", human_bytes(m.master)) : "",
                     human_bytes(m.state), human_bytes(m.activations));
}

std::string keys_to_lower(const RankMemory& need, std::int64_t per_rank) {
  // The larger part of the estimate first (the model's buffers or the activations), and the
  // other too when it alone exceeds `per_rank`. The activations are the larger of training's and
  // evaluation's, and each has its own batch key.
  const std::int64_t model_part = need.buffers();
  const std::string batch_key =
      need.eval_activations ? "data.eval_batch_size (the evaluation batch per rank)"
                            : "data.batch_size (or keep the global batch with train.grad_accum)";
  const std::string model_key = "model.widths";
  return need.activations >= model_part
             ? batch_key + (model_part > per_rank ? " and " + model_key : "")
             : model_key + (need.activations > per_rank ? " and " + batch_key : "");
}

AvailableMemory available_memory(DeviceKind device) {
  AvailableMemory a;
  a.host_bytes = read_mem_available();
  if (device == DeviceKind::Cuda) a.device_bytes = device_free_bytes(device);
  return a;
}

void check_memory_fits(const RankMemory& need, const Config& config, DeviceKind device,
                       const AvailableMemory& available, int ranks_on_node) {
  const bool on_gpu = device == DeviceKind::Cuda;
  const std::int64_t have = on_gpu ? available.device_bytes : available.host_bytes;
  // A GPU serves one rank; the host's memory is shared by the node's ranks.
  const std::int64_t sharing = on_gpu ? 1 : std::max(ranks_on_node, 1);
  if (have < 0 || need.total() <= have / sharing) return;
  const std::string fix = "lower " + keys_to_lower(need, have / sharing);
  const std::string where =
      on_gpu ? fmt::format("the GPU has {} free", human_bytes(have))
             : fmt::format("this node has {} available (MemAvailable){}", human_bytes(have),
                           sharing > 1 ? fmt::format(" for its {} ranks", sharing) : "");
  throw UserError(fmt::format(
      "{}: one rank needs an estimated {}, but {}: {}", config.source_path, describe_memory(need),
      where, fix));
}

}  // namespace zl
