// check_bench_memory (see bench_memory.h).
#include "runtime/bench/bench_memory.h"

#include <algorithm>

#include <fmt/format.h>

#include "base/errors.h"
#include "models/model.h"
#include "runtime/bench/bench.h"
#include "runtime/train/plan/memory_estimate.h"
#include "runtime/train/plan/mode_plan.h"
#include "runtime/train/plan/plan_report.h"
#include "runtime/train/plan/shard_layout.h"

namespace zl {

void check_bench_memory(const Config& config, const World& world) {
  const ParameterStore layout = Model::parameter_layout(config.model);
  const std::vector<double> caps = config.bench.bucket_cap_mb.empty()
                                       ? std::vector<double>{config.parallel.bucket_cap_mb}
                                       : config.bench.bucket_cap_mb;
  // The largest run's estimate (the trainer checks each run itself, on its device; here the runs
  // are counted on the host, where a CPU run allocates them beside the bench's own buffers).
  RankMemory need;
  for (const PrecisionConfig& precision : bench_precisions(config)) {
    const Config c = with_precision(config, precision);
    for (const double cap : caps) {
      for (const Mode& m : bench_modes(config)) {
        // The run's own layout and buckets (element shards pad them; link.ranks shrinks shards).
        const ModePlan mode = bench_mode_plan(m, c, precision, world.size);
        const PlannedLayout planned =
            plan_layout(c.model, c.parallel, mode, planned_ranks(c, mode, world.size), cap);
        const RankMemory e = estimate_peak_rank_memory(c, planned.layout, planned.plan, mode);
        if (e.total() > need.total()) need = e;
      }
    }
  }
  // The bench's fp32 CPU copy of the model, and its optimizer measurement: parameters, gradients,
  // two moments and a master of at least 8M elements (bench_limits.cpp), held while it runs.
  const std::int64_t numel = layout.total_numel();
  const std::int64_t measured = std::max<std::int64_t>(numel, std::int64_t{8} << 20);
  const std::int64_t own = numel * 4 + 5 * measured * 4;
  need.parameters += numel * 4 + measured * 4;
  need.gradients += measured * 4;
  need.state += 3 * measured * 4;
  // runtime.memory_limit_mb holds for the bench's own buffers too (each run's trainer checks only
  // its run), and is checked here, before the bench measures or allocates anything.
  if (config.runtime.memory_limit_mb > 0) {
    const auto limit = static_cast<std::int64_t>(config.runtime.memory_limit_mb * 1024.0 * 1024.0);
    if (need.total() > limit) {
      throw UserError(fmt::format(
          "{}: the bench needs an estimated {} on one rank, above runtime.memory_limit_mb = {:g} "
          "({}): its largest run, and the bench's own {} (a CPU copy of the model and the "
          "optimizer measurement's buffers); raise runtime.memory_limit_mb, or bench a smaller "
          "model.widths",
          where_set(config, "runtime.memory_limit_mb"), describe_memory(need),
          config.runtime.memory_limit_mb, human_bytes(limit), human_bytes(own)));
    }
  }
  check_memory_fits(need, config, DeviceKind::Cpu, available_memory(DeviceKind::Cpu),
                    world.local_size);
}

}  // namespace zl
