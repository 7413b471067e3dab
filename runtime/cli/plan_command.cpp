// `zerolap plan CONFIG [--world N] [--link-gbps B] [--latency-us A] [--node-ranks N
// --intra-gbps I] [--compute-ms X]`: prints the bucket plan (buckets, sizes, assigned ranks) and
// the per-rank totals, including optimizer-state bytes for the configured mode. With a link (the
// options or the config's [link]) it also prints, for each mode (flat, and hybrid with a shard
// group per node or parallel.shard_group), the per-rank memory and the modelled communication
// per step at N ranks, on each tier with --node-ranks; and the step time at 8, 64 and 512 ranks:
// predicted, with its scaling efficiency, for a measured compute time, else its floor
// (runtime/bench/scaling_model.h). Worlds above kRankRowsShown ranks get a distribution over the
// ranks instead of a row per rank.
#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "base/errors.h"
#include "runtime/bench/bench_report.h"
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

constexpr int kRankRowsShown = 16;

using SizeText = std::string (*)(std::int64_t);
std::string count_text(std::int64_t n) { return fmt::format("{}", n); }

// A row of min / median / max of per-rank values (every rank of a world above kRankRowsShown),
// and the rank holding the max (the lowest such rank).
std::string spread_row(const char* what, const std::vector<std::int64_t>& per_rank, SizeText text) {
  std::vector<std::int64_t> sorted = per_rank;
  std::sort(sorted.begin(), sorted.end());
  const auto max_rank = std::max_element(per_rank.begin(), per_rank.end()) - per_rank.begin();
  return fmt::format("  {:<16} {:>12} {:>12} {:>12}  (rank {})\n", what, text(sorted.front()),
                     text(sorted[sorted.size() / 2]), text(sorted.back()), max_rank);
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
    buckets[i] = mode.stepped_buckets(plan, r);  // as format_bucket_plan's rows
    owned[i] = mode.stepped_numel(plan, r);
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
  // The largest rank's real figure: its buffers over the model's parameters (padding, the whole
  // buckets a bucket mode gives one rank, and a stage-2 pool included).
  const RankMemory peak = estimate_peak_rank_memory(config, store, plan, mode);
  const double params = static_cast<double>(std::max<std::int64_t>(store.parameter_numel(), 1));
  const auto per_param = [&](std::int64_t bytes) { return static_cast<double>(bytes) / params; };
  std::string out = fmt::format(
      "\nbytes per parameter per rank ({}, reduce_dtype {}, {}, {}): formula {}; the largest rank "
      "holds {:.2f} at d = {} (parameters {:.4g} + gradients {:.4g} + master {:.4g} + optimizer "
      "state {:.4g})\n",
      precision_label(config.precision), dtype_name(mode.reduce_dtype),
      to_string(config.optimizer.kind), mode.name(), bytes_per_parameter_formula(mode),
      per_param(peak.buffers()), d, per_param(peak.parameters), per_param(peak.gradients),
      per_param(peak.master), per_param(peak.state));
  const RankMemory r0 = rank_memory(mode, plan, store.total_numel(), 0);
  if (mode.pools_gradients()) {
    out += fmt::format(
        "gradient pool: {} of {} buffers of the largest bucket ({} elements): {} per rank\n",
        mode.pool_buffers(plan), kGradientPoolBuffers, plan.largest_bucket_numel(),
        human_bytes(r0.gradient_pool));
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
    out += spread_header(d);
    const std::pair<const char*, std::int64_t (*)(const RankMemory&)> rows[] = {
        {"parameters", [](const RankMemory& m) { return m.parameters; }},
        {"gradients", [](const RankMemory& m) { return m.gradients; }},
        {"master", [](const RankMemory& m) { return m.master; }},
        {"optimizer state", [](const RankMemory& m) { return m.state; }},
        {"activations", [](const RankMemory& m) { return m.activations; }},
        {"total", [](const RankMemory& m) { return m.total(); }}};
    for (const auto& [what, field] : rows) {
      std::vector<std::int64_t> column;
      for (const RankMemory& m : ranks) column.push_back(field(m));
      out += spread_row(what, column, human_bytes);
    }
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
  out += fmt::format("largest rank: {}\n", describe_memory(peak));
  return out;
}

// The layout and buckets of `mode` at `ranks` ranks (element shards pad every bucket, for the
// shard group's ranks with hybrid sharding: planned_ranks).
PlannedLayout plan_at(const Config& config, const ModePlan& mode, int ranks) {
  return plan_layout(config.model, config.parallel, mode, planned_ranks(config, mode, ranks));
}

// The mode column: the name, and a hybrid row's replicas at `ranks` ranks.
std::string mode_cell(const ModePlan& mode, int ranks) {
  if (mode.mode.shard_group == 0) return mode.name();
  const int replicas = mode.mode.replicas(ranks);
  return fmt::format("{} ({} replica{})", mode.name(), replicas, replicas == 1 ? "" : "s");
}

// The link as the tables' headings name it.
std::string link_text(const LinkConfig& link) {
  if (link.node_ranks == 0) {
    return link.bandwidth_gbps > 0
               ? fmt::format("a {:g} Gb/s, {:g} us link", link.bandwidth_gbps, link.latency_us)
               : fmt::format("a {:g} us link of unlimited bandwidth", link.latency_us);
  }
  return fmt::format("nodes of {} ranks, {:g} Gb/s per rank between them and {:g} Gb/s inside, "
                     "{:g} us per hop",
                     link.node_ranks, link.bandwidth_gbps, link.intra_gbps, link.latency_us);
}

constexpr int kModeColumn = 45;  // the longest name: zero3/after_backward/reduce_scatter_allgather

std::string scaling_tables(const Config& config, const ParameterStore& store, int ranks,
                           const PlanOptions& options) {
  const LinkConfig& link = config.link;
  const bool two_tiers = link.node_ranks > 0;
  const std::vector<ModePlan> modes = all_mode_plans(config);
  std::string out;
  if (ranks == 1) {
    out += "\nno communication at 1 rank: give --world N for each mode's modelled communication "
           "per step at N ranks\n";
  } else {
    out += wrap_lines(fmt::format(
        "\nmodelled communication per step at {} ranks on {} (ring alpha-beta model{}: "
        "docs/bench.md, \"A scaling prediction\"); memory per rank; {}",
        ranks, link_text(link),
        two_tiers ? " per tier, each communicator on the tier its ranks span" : ", one flat ring",
        two_tiers ? "MB sent per rank and ms on each tier; last: the last bucket's chain, which "
                    "nothing hides"
                  : "wire MB sent per rank; unhidable: the last bucket's collectives"));
    out += two_tiers ? fmt::format("{:<{}} {:>10} {:>8} {:>8} {:>8} {:>8} {:>7}\n", "mode",
                                   kModeColumn, "memory", "inter MB", "intra MB", "inter ms",
                                   "intra ms", "last ms")
                     : fmt::format("{:<{}} {:>10} {:>10} {:>10} {:>12}\n", "mode", kModeColumn,
                                   "memory", "comm ms", "wire MB", "unhidable ms");
    for (const ModePlan& m : modes) {
      const ModePlan at_world = at_ranks(m, ranks);  // the plan command checked the group divides
      const PlannedLayout at = plan_at(config, at_world, ranks);
      const ModeComm c = modelled_mode_comm(at_world, at.plan, link, ranks);
      const std::string memory =
          human_bytes(estimate_peak_rank_memory(config, at.layout, at.plan, at_world).total());
      const TierComm& inter = c.tier(LinkTier::Inter);
      const TierComm& intra = c.tier(LinkTier::Intra);
      out += two_tiers
                 ? fmt::format("{:<{}} {:>10} {:>8.2f} {:>8.2f} {:>8.3f} {:>8.3f} {:>7.3f}\n",
                               mode_cell(m, ranks), kModeColumn, memory,
                               static_cast<double>(inter.wire_bytes) * 1e-6,
                               static_cast<double>(intra.wire_bytes) * 1e-6, inter.total_s * 1e3,
                               intra.total_s * 1e3, c.last_s * 1e3)
                 : fmt::format("{:<{}} {:>10} {:>10.3f} {:>10.2f} {:>12.3f}\n",
                               mode_cell(m, ranks), kModeColumn, memory, c.total_s * 1e3,
                               static_cast<double>(c.wire_bytes) * 1e-6, c.last_s * 1e3);
    }
  }
  // The step at 8, 64 and 512 ranks: for a measured compute time, else its floor (zero compute).
  const bool measured = options.compute_ms > 0.0;
  const double compute_s = options.compute_ms * 1e-3;
  const double share = backward_flop_share(store);
  const std::vector<int> sizes{8, 64, 512};
  out += measured
             ? wrap_lines(fmt::format(
                   "\npredicted step time (ms) and scaling efficiency (compute / step) from a "
                   "measured compute time of {:g} ms per step ({:.0f}% backward by FLOPs; the "
                   "model: docs/bench.md, \"A scaling prediction\"; -: the shard group does not "
                   "divide the ranks)",
                   options.compute_ms, share * 100.0))
             : wrap_lines(
                   "\nthe step's floor (ms): the predicted step time at zero compute, what the "
                   "links alone take (--compute-ms X, a measured compute time per step, predicts "
                   "the step; the model: docs/bench.md, \"A scaling prediction\"; -: the shard "
                   "group does not divide the ranks)");
  out += fmt::format("{:<{}}", "mode", kModeColumn);
  for (int n : sizes) out += fmt::format(" {:>17}", fmt::format("{} ranks", n));
  out += "\n";
  for (const ModePlan& m : modes) {
    out += fmt::format("{:<{}}", m.name(), kModeColumn);
    for (const int n : sizes) {
      if (!fits_ranks(m, n)) {
        out += fmt::format(" {:>17}", "-");
        continue;
      }
      const ModePlan at_n = at_ranks(m, n);
      const BucketPlan plan_n = plan_at(config, at_n, n).plan;
      const ModeComm c = modelled_mode_comm(at_n, plan_n, link, n);
      const double step = predicted_step_s(at_n, c, compute_s, compute_shares(store, plan_n));
      out += fmt::format(" {:>17}", measured ? fmt::format("{:.2f} ({:.0f}%)", step * 1e3,
                                                           100.0 * compute_s / step)
                                             : fmt::format("{:.2f}", step * 1e3));
    }
    out += "\n";
  }
  return out;
}

}  // namespace

int run_plan_command(const ConfigArgs& args, int world_size, const World& world,
                     const PlanOptions& options) {
  Config config;
  const int ranks = world_size > 0 ? world_size : world.size;  // --world N, else the job's size
  agree_on_user_errors(world, [&] {
    const FlagOverride given[] = {{"--link-gbps", "link.bandwidth_gbps", options.link_gbps},
                                  {"--latency-us", "link.latency_us", options.latency_us},
                                  {"--node-ranks", "link.node_ranks", options.node_ranks},
                                  {"--intra-gbps", "link.intra_gbps", options.intra_gbps}};
    std::vector<FlagOverride> flags;
    for (const FlagOverride& f : given) {
      if (!f.value.empty()) flags.push_back(f);
    }
    config = load_config(args.path, args.overrides, flags);
    apply_global_batch(config, ranks);  // the split for the planned world
    if (options.compute_ms > 0.0 && !config.link.enabled()) {
      throw UserError("plan: --compute-ms predicts step times on a modelled link: give --link-gbps "
                      "(or [link] bandwidth_gbps in the config)");
    }
    // The prediction is for a cluster of `ranks` ranks: the link model's ranks are those, its
    // nodes and the shard groups must tile them.
    config.link.ranks = 0;
    check_link_world(config.link, ranks, where_set(config, "link.node_ranks"));
    check_shard_group(config, ranks);
  }, config.runtime.timeout_s);
  if (!world.is_root()) return 0;
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
