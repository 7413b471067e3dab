// `zerolap plan CONFIG [--world N] [--link-gbps B] [--latency-us A] [--compute-ms X]`: prints the
// bucket plan (buckets, sizes, assigned ranks) and the per-rank totals, including optimizer-state
// bytes for the configured mode. With a link (the options or the config's [link]) it also prints,
// for each mode, the per-rank memory and the modelled communication per step at N ranks; with a
// measured compute time, the predicted step time and scaling efficiency at 8, 64 and 512 ranks
// (Note [Scaling model], runtime/bench/scaling_model.h).
#include <algorithm>

#include <fmt/format.h>

#include "base/errors.h"
#include "models/model.h"
#include "runtime/bench/scaling_model.h"
#include "runtime/train/bucket_plan.h"
#include "runtime/train/memory_estimate.h"
#include "runtime/train/mode_plan.h"
#include "runtime/cli/commands.h"
#include "runtime/comm/simulated_link.h"
#include "runtime/config/config.h"

namespace zl {
namespace {

double mib(std::int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

// The bytes per parameter of the config's mode and precision, as a formula in d, and per rank the
// memory estimate (runtime/train/memory_estimate.h): the model's buffers as ModePlan::rank_memory
// counts them, which the trainer allocates, and the activations. The one memory figure plan prints.
std::string memory_table(const Config& config, const BucketPlan& plan, const ParameterStore& store,
                         const ModePlan& mode) {
  const int d = plan.world_size;
  const BytesPerParameter b = bytes_per_parameter(mode, d);
  std::string out = fmt::format(
      "\nbytes per parameter per rank ({}, reduce_dtype {}, {}, {}): parameters {:g} + gradients "
      "{:g} + master {:g} + optimizer state {:g} = {:.2f} at d = {}; formula {}\n",
      precision_label(config.precision), dtype_name(mode.reduce_dtype),
      to_string(config.optimizer.kind), mode.name(), b.parameters, b.gradients, b.master, b.state,
      b.total(), d, bytes_per_parameter_formula(mode));
  out += fmt::format("\nmemory per rank in bytes (estimated before allocation; the trainer checks it "
                     "against the node's memory)\n");
  out += fmt::format("{:>6}  {:>14}  {:>14}  {:>14}  {:>16}  {:>14}  {:>14}\n", "rank",
                     "parameters", "gradients", "master", "optimizer state", "activations",
                     "total");
  for (int r = 0; r < d; ++r) {
    const MemoryEstimate m = estimate_rank_memory(config, store, plan, mode, r);
    out += fmt::format("{:>6}  {:>14}  {:>14}  {:>14}  {:>16}  {:>14}  {:>14}\n", r, m.parameters,
                       m.gradients, m.master, m.optimizer_state, m.activations, m.total());
  }
  out += fmt::format("largest rank: {}\n",
                     describe_memory(estimate_peak_rank_memory(config, store, plan, mode)));
  return out;
}

BucketPlan plan_at(const Config& config, const ParameterStore& store, int ranks) {
  return build_bucket_plan(store, config.parallel.bucket_cap_mb,
                           config.parallel.first_bucket_cap_mb, ranks, config.parallel.assignment);
}

std::string scaling_tables(const Config& config, const ParameterStore& store, int ranks,
                           const PlanOptions& options) {
  const LinkConfig& link = config.link;
  std::string out = fmt::format(
      "\nmodelled communication per step at {} ranks on a {:g} Gb/s, {:g} us link (ring "
      "alpha-beta model, no contention, no hierarchy: docs/bench.md)\n",
      ranks, link.bandwidth_gbps, link.latency_us);
  out += fmt::format("{:<39} {:>12} {:>10} {:>12} {:>12}\n", "mode", "memory MiB", "comm ms",
                     "wire MB", "unhidable ms");
  const BucketPlan plan = plan_at(config, store, ranks);
  for (const ModePlan& m : all_mode_plans(config)) {
    const ModeComm c = modelled_mode_comm(m, plan, link, ranks);
    out += fmt::format("{:<39} {:>12.1f} {:>10.3f} {:>12.2f} {:>12.3f}\n", m.name(),
                       mib(estimate_peak_rank_memory(config, store, plan, m).total()), c.total_s * 1e3,
                       static_cast<double>(c.wire_bytes) * 1e-6, c.last_s * 1e3);
  }
  if (options.compute_ms <= 0.0) return out;
  const double compute_s = options.compute_ms * 1e-3;
  const double share = backward_flop_share(store);
  const std::vector<int> sizes{8, 64, 512};
  out += fmt::format(
      "\npredicted step time (ms) and scaling efficiency (compute / step) from a measured compute "
      "time of {:g} ms per step ({:.0f}% backward by FLOPs); Note [Scaling model]\n",
      options.compute_ms, share * 100.0);
  out += fmt::format("{:<39}", "mode");
  for (int n : sizes) out += fmt::format(" {:>18}", fmt::format("{} ranks", n));
  out += "\n";
  std::vector<BucketPlan> plans;
  for (int n : sizes) plans.push_back(plan_at(config, store, n));
  for (const ModePlan& m : all_mode_plans(config)) {
    out += fmt::format("{:<39}", m.name());
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      const ModeComm c = modelled_mode_comm(m, plans[i], link, sizes[i]);
      const double step = predicted_step_s(m, c, compute_s, share);
      out += fmt::format(" {:>18}", fmt::format("{:.2f} ({:.0f}%)", step * 1e3,
                                                100.0 * compute_s / step));
    }
    out += "\n";
  }
  return out;
}

}  // namespace

int run_plan_command(const ConfigArgs& args, int world_size, const World& world,
                     const PlanOptions& options) {
  Config config;
  agree_on_user_errors(world, [&] {
    std::vector<FlagOverride> flags;
    if (!options.link_gbps.empty()) {
      flags.push_back({"--link-gbps", "link.bandwidth_gbps", options.link_gbps});
    }
    if (!options.latency_us.empty()) {
      flags.push_back({"--latency-us", "link.latency_us", options.latency_us});
    }
    config = load_config(args.path, args.overrides, flags);
    if (options.compute_ms > 0.0 && !config.link.enabled()) {
      throw UserError("plan: --compute-ms predicts step times on a modelled link: give --link-gbps "
                      "(or [link] bandwidth_gbps in the config)");
    }
  }, config.runtime.timeout_s);
  if (!world.is_root()) return 0;
  const int ranks = world_size > 0 ? world_size : world.size;
  // The prediction is for a cluster of `ranks` ranks: the link model's ranks are those.
  config.link.ranks = 0;
  // Laid out, not allocated: a plan for a model too large for this machine still prints.
  const ParameterStore layout = Model::parameter_layout(config.model);
  const ModePlan mode = make_mode_plan(config.parallel, config.optimizer, config.precision);
  const BucketPlan plan = plan_at(config, layout, ranks);
  fmt::print("bucket plan of {} for {} rank{}: mode {}, bucket_cap_mb {}, first_bucket_cap_mb {}, "
             "assignment {}, optimizer {}\n\n",
             config.source_path, ranks, ranks == 1 ? "" : "s", to_string(mode.mode),
             config.parallel.bucket_cap_mb, config.parallel.first_bucket_cap_mb,
             to_string(config.parallel.assignment), to_string(config.optimizer.kind));
  fmt::print("{}", format_bucket_plan(plan, layout, mode));
  fmt::print("{}", memory_table(config, plan, layout, mode));
  if (config.link.enabled()) fmt::print("{}", scaling_tables(config, layout, ranks, options));
  return 0;
}

}  // namespace zl
