// `zerolap plan CONFIG [--world N] [--link-gbps B] [--latency-us A] [--compute-ms X]`: prints the
// bucket plan (buckets, sizes, assigned ranks) and the per-rank totals, including optimizer-state
// bytes for the configured mode. With a link (the options or the config's [link]) it also prints,
// for each mode, the per-rank memory and the modelled communication per step at N ranks; with a
// measured compute time, the predicted step time and scaling efficiency at 8, 64 and 512 ranks
// (runtime/bench/scaling_model.h). Worlds above kRankRowsShown ranks get a distribution over the
// ranks instead of a row per rank.
#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "base/errors.h"
#include "models/model.h"
#include "runtime/bench/scaling_model.h"
#include "runtime/train/plan/bucket_plan.h"
#include "runtime/train/plan/memory_estimate.h"
#include "runtime/train/plan/mode_plan.h"
#include "runtime/train/plan/plan_report.h"
#include "runtime/train/plan/shard_layout.h"
#include "runtime/cli/commands.h"
#include "runtime/comm/link/simulated_link.h"
#include "runtime/config/config.h"
#include "runtime/config/global_batch.h"

namespace zl {
namespace {

// Worlds larger than this get a distribution over the ranks instead of a row per rank.
constexpr int kRankRowsShown = 16;

// min / median / max of per-rank values, and the rank holding the max (the lowest such rank).
struct Spread {
  std::int64_t min = 0, median = 0, max = 0;
  int max_rank = 0;
};

Spread spread_of(const std::vector<std::int64_t>& per_rank) {
  Spread s;
  if (per_rank.empty()) return s;
  std::vector<std::int64_t> sorted = per_rank;
  std::sort(sorted.begin(), sorted.end());
  s.min = sorted.front(), s.median = sorted[sorted.size() / 2], s.max = sorted.back();
  s.max_rank = static_cast<int>(std::max_element(per_rank.begin(), per_rank.end()) - per_rank.begin());
  return s;
}

using SizeText = std::string (*)(std::int64_t);
std::string count_text(std::int64_t n) { return fmt::format("{}", n); }

std::string spread_row(const char* what, const std::vector<std::int64_t>& per_rank, SizeText text) {
  const Spread s = spread_of(per_rank);
  return fmt::format("  {:<16} {:>12} {:>12} {:>12}  (rank {})\n", what, text(s.min), text(s.median),
                     text(s.max), s.max_rank);
}

std::string spread_header(int d) {
  return fmt::format("  {:<16} {:>12} {:>12} {:>12}  (a rank with the max; --world {} or fewer "
                     "prints every rank)\n",
                     fmt::format("over {} ranks", d), "min", "median", "max", kRankRowsShown);
}

// The bucket rows, then per rank the buckets and elements owned and the optimizer state (as `mode`
// allocates them): a row per rank up to kRankRowsShown ranks, else their distribution.
std::string ownership_tables(const BucketPlan& plan, const ParameterStore& store,
                             const ModePlan& mode) {
  const int d = plan.world_size;
  if (d <= kRankRowsShown) return format_bucket_plan(plan, store, mode);
  std::vector<std::int64_t> buckets(static_cast<std::size_t>(d)), owned(buckets.size()),
      state(buckets.size());
  for (int r = 0; r < d; ++r) {
    const auto i = static_cast<std::size_t>(r);
    for (const auto& b : plan.buckets) buckets[i] += mode.element_shards || b.assigned_rank == r;
    // Element shards: rank r owns shard r of every bucket.
    owned[i] = mode.element_shards ? mode.stepped_numel(plan, r) : plan.numel_assigned_to(r);
    state[i] = mode.state_bytes(plan, r);
  }
  return format_bucket_table(plan, store, mode) + spread_header(d) +
         spread_row("buckets", buckets, count_text) +
         spread_row("owned elements", owned, count_text) +
         spread_row("optimizer state", state, human_bytes) + format_step_balance(plan, store, mode);
}

// The bytes per parameter of the config's mode and precision, as a formula in d, and per rank the
// memory estimate (runtime/train/plan/memory_estimate.h): the model's buffers as
// ModePlan::rank_memory counts them, which the trainer allocates, and the activations. The one
// memory figure plan prints.
std::string memory_table(const Config& config, const BucketPlan& plan, const ParameterStore& store,
                         const ModePlan& mode) {
  const int d = plan.world_size;
  const BytesPerParameter b = bytes_per_parameter(mode, d);
  // The largest rank's real figure: its buffers over the model's parameters (padding, the whole
  // buckets a bucket mode gives one rank, and a stage-2 pool included).
  const RankMemory peak = estimate_peak_rank_memory(config, store, plan, mode);
  const double params = static_cast<double>(std::max<std::int64_t>(store.parameter_numel(), 1));
  const auto per_param = [&](std::int64_t bytes) { return static_cast<double>(bytes) / params; };
  std::string out = fmt::format(
      "\nbytes per parameter per rank ({}, reduce_dtype {}, {}, {}): parameters {:g} + gradients "
      "{:g} + master {:g} + optimizer state {:g} = {:.2f} at d = {}; formula {}; the largest rank "
      "holds {:.2f} (parameters {:.4g} + gradients {:.4g} + master {:.4g} + optimizer state "
      "{:.4g})\n",
      precision_label(config.precision), dtype_name(mode.reduce_dtype),
      to_string(config.optimizer.kind), mode.name(), b.parameters, b.gradients, b.master, b.state,
      b.total(), d, bytes_per_parameter_formula(mode), per_param(peak.buffers()),
      per_param(peak.parameters), per_param(peak.gradients), per_param(peak.master),
      per_param(peak.state));
  const RankMemory r0 = rank_memory(mode, plan, store.total_numel(), 0);
  if (mode.pools_gradients()) {
    out += fmt::format("gradient pool: {} of {} buffers of the largest bucket ({} elements): "
                       "{} per rank\n",
                       std::min<std::size_t>(kGradientPoolBuffers, plan.buckets.size()),
                       kGradientPoolBuffers, plan.largest_bucket_numel(), human_bytes(r0.gradient_pool));
  }
  if (mode.gathers_parameters()) {
    // Whole-bucket buffers: with few large buckets they, not the shards, set stage 3's memory.
    const std::int64_t shards = r0.parameters - r0.gather_buffers;
    const bool buffers_dominate = r0.gather_buffers + r0.gradient_pool > shards;
    out += fmt::format("gather buffers: {} of the largest bucket ({} elements): {} per rank, "
                       "beside {} of parameter shards{}\n",
                       mode.gather_buffers(plan), plan.largest_bucket_numel(),
                       human_bytes(r0.gather_buffers), human_bytes(shards),
                       buffers_dominate ? "; these bucket-sized buffers and the gradient pool "
                                          "outweigh the shards: a smaller parallel.bucket_cap_mb "
                                          "shrinks them (down to one module per bucket)"
                                        : "");
  }
  out += "\nmemory per rank (estimated before allocation; the trainer checks it against the node's "
         "memory)\n";
  std::vector<RankMemory> ranks;
  for (int r = 0; r < d; ++r) ranks.push_back(estimate_rank_memory(config, store, plan, mode, r));
  if (d > kRankRowsShown) {
    const auto column = [&](std::int64_t (*field)(const RankMemory&)) {
      std::vector<std::int64_t> v;
      for (const RankMemory& m : ranks) v.push_back(field(m));
      return v;
    };
    out += spread_header(d);
    out += spread_row("parameters", column([](const RankMemory& m) { return m.parameters; }),
                      human_bytes);
    out += spread_row("gradients", column([](const RankMemory& m) { return m.gradients; }),
                      human_bytes);
    out += spread_row("master", column([](const RankMemory& m) { return m.master; }),
                      human_bytes);
    out += spread_row("optimizer state",
                      column([](const RankMemory& m) { return m.state; }), human_bytes);
    out += spread_row("activations", column([](const RankMemory& m) { return m.activations; }),
                      human_bytes);
    out += spread_row("total", column([](const RankMemory& m) { return m.total(); }),
                      human_bytes);
  } else {
    out += fmt::format("{:>6}  {:>11}  {:>11}  {:>11}  {:>15}  {:>11}  {:>11}\n", "rank",
                       "parameters", "gradients", "master", "optimizer state", "activations",
                       "total");
    for (int r = 0; r < d; ++r) {
      const RankMemory& m = ranks[static_cast<std::size_t>(r)];
      out += fmt::format("{:>6}  {:>11}  {:>11}  {:>11}  {:>15}  {:>11}  {:>11}\n", r,
                         human_bytes(m.parameters), human_bytes(m.gradients),
                         human_bytes(m.master), human_bytes(m.state),
                         human_bytes(m.activations), human_bytes(m.total()));
    }
  }
  out += fmt::format("largest rank: {}\n",
                     describe_memory(estimate_peak_rank_memory(config, store, plan, mode)));
  return out;
}

// The layout and buckets of `mode` at `ranks` ranks (element shards pad every bucket; with a
// shard group they are laid out for the group's ranks).
PlannedLayout plan_at(const Config& config, const ModePlan& mode, int ranks) {
  return plan_layout(config.model, config.parallel, mode, planned_ranks(config, mode, ranks));
}

std::string scaling_tables(const Config& config, const ParameterStore& store, int ranks,
                           const PlanOptions& options) {
  const LinkConfig& link = config.link;
  std::string out;
  if (ranks == 1) {
    out += "\nno communication at 1 rank: give --world N for each mode's modelled communication "
           "per step at N ranks\n";
  } else {
    out += fmt::format(
        "\nmodelled communication per step at {} ranks on a {:g} Gb/s, {:g} us link (ring "
        "alpha-beta model, no contention, no hierarchy: docs/bench.md, \"A scaling "
        "prediction\")\n",
        ranks, link.bandwidth_gbps, link.latency_us);
    out += fmt::format("{:<46} {:>12} {:>10} {:>12} {:>12}\n", "mode", "memory", "comm ms",
                       "wire MB", "unhidable ms");
    for (const ModePlan& m : all_mode_plans(config)) {
      const PlannedLayout at = plan_at(config, m, ranks);
      const ModeComm c = modelled_mode_comm(m, at.plan, link, ranks);
      out += fmt::format("{:<46} {:>12} {:>10.3f} {:>12.2f} {:>12.3f}\n", m.name(),
                         human_bytes(estimate_peak_rank_memory(config, at.layout, at.plan, m).total()),
                         c.total_s * 1e3, static_cast<double>(c.wire_bytes) * 1e-6, c.last_s * 1e3);
    }
  }
  if (options.compute_ms <= 0.0) return out;
  const double compute_s = options.compute_ms * 1e-3;
  const double share = backward_flop_share(store);
  const std::vector<int> sizes{8, 64, 512};
  out += fmt::format(
      "\npredicted step time (ms) and scaling efficiency (compute / step) from a measured compute "
      "time of {:g} ms per step ({:.0f}% backward by FLOPs; the model: docs/bench.md, \"A "
      "scaling prediction\")\n",
      options.compute_ms, share * 100.0);
  out += fmt::format("{:<46}", "mode");
  for (int n : sizes) out += fmt::format(" {:>18}", fmt::format("{} ranks", n));
  out += "\n";
  for (const ModePlan& m : all_mode_plans(config)) {
    out += fmt::format("{:<46}", m.name());
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      const ModeComm c = modelled_mode_comm(m, plan_at(config, m, sizes[i]).plan, link, sizes[i]);
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
    // The split for the planned world (--world N, else this job's size).
    apply_global_batch(config, world_size > 0 ? world_size : world.size);
    check_shard_group(config, world_size > 0 ? world_size : world.size);
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
  const ModePlan mode = make_run_mode_plan(config, ranks);
  const PlannedLayout planned = plan_at(config, mode, ranks);
  const ParameterStore& layout = planned.layout;
  const BucketPlan& plan = planned.plan;
  // Element shards give rank r shard r of every bucket: parallel.assignment is unused there.
  const std::string assignment =
      mode.element_shards ? fmt::format("{} (unused: rank r owns shard r of every bucket)",
                                        to_string(config.parallel.assignment))
                          : std::string(to_string(config.parallel.assignment));
  fmt::print("bucket plan of {} for {} rank{}: mode {}, bucket_cap_mb {}, first_bucket_cap_mb {}, "
             "assignment {}, optimizer {}\n\n",
             config.source_path, ranks, ranks == 1 ? "" : "s", mode.name(),
             config.parallel.bucket_cap_mb, config.parallel.first_bucket_cap_mb, assignment,
             to_string(config.optimizer.kind));
  if (world_size == 0 && ranks == 1) {
    fmt::print("(planned for 1 rank, the size of this job: --world N plans for N ranks)\n\n");
  }
  fmt::print("batch: {}\n\n", describe_batch_split(config, ranks));
  fmt::print("{}", ownership_tables(plan, layout, mode));
  fmt::print("{}", memory_table(config, plan, layout, mode));
  if (config.link.enabled()) fmt::print("{}", scaling_tables(config, layout, ranks, options));
  return 0;
}

}  // namespace zl
