// check_memory_limit: runtime.memory_limit_mb against the largest rank's estimate, naming what
// would fit (memory_limit.h).
#include "runtime/train/plan/memory_limit.h"

#include <string>
#include <vector>

#include <fmt/format.h>

#include "base/errors.h"
#include "runtime/train/plan/memory_estimate.h"
#include "runtime/train/plan/plan_report.h"
#include "runtime/train/plan/shard_layout.h"

namespace zl {
namespace {

RankMemory peak(const Config& config, int world) {
  const ModePlan mode = make_run_mode_plan(config, world);
  const PlannedLayout planned =
      plan_layout(config.model, config.parallel, mode, planned_ranks(config, mode, world));
  return estimate_peak_rank_memory(config, planned.layout, planned.plan, mode);
}

// The fewest ranks, a power of two above `world` up to 4096, at which `config` fits; 0: none.
// None with a shard group: a rank's state is then sharded over its group whatever the world.
int ranks_that_fit(const Config& config, int world, std::int64_t limit) {
  if (config.parallel.shard_group > 0) return 0;
  for (int w = 2; w <= 4096; w *= 2) {
    if (w > world && peak(config, w).total() <= limit) return w;
  }
  return 0;
}

}  // namespace

void check_memory_limit(const Config& config, int world) {
  if (config.runtime.memory_limit_mb <= 0) return;
  const auto limit = static_cast<std::int64_t>(config.runtime.memory_limit_mb * 1024.0 * 1024.0);
  const RankMemory need = peak(config, world);
  if (need.total() <= limit) return;

  // Each trade alone on top of the config, then together; with the ranks they need.
  std::vector<std::string> fits;
  const auto consider = [&](const std::string& what, const Config& c) {
    const std::int64_t bytes = peak(c, world).total();
    if (bytes > limit) return false;
    fits.push_back(fmt::format("{} ({} on the largest rank)", what, human_bytes(bytes)));
    return true;
  };
  Config all = config;
  std::vector<std::string> all_keys;
  const auto trade = [&](const std::string& keys, const auto& apply) {
    Config c = config;
    apply(c);
    consider(keys, c);
    apply(all);
    all_keys.push_back(keys);
  };
  if (config.parallel.zero_stage < 3) {
    trade("parallel.mode = \"zero\", parallel.collective = \"reduce_scatter_allgather\", "
          "parallel.zero_stage = 3",
          [](Config& c) {
            c.parallel.mode = ParallelMode::Zero;
            c.parallel.collective = CollectiveKind::ReduceScatterAllgather;
            c.parallel.zero_stage = 3;
          });
  }
  if (config.precision.compute != ComputePrecision::Bf16) {
    trade("precision.compute = \"bf16\"",
          [](Config& c) { c.precision.compute = ComputePrecision::Bf16; });
  }
  // Smaller buckets: smaller gather buffers (stage 3) and gradient pool (stage 2).
  const double cap_mb = config.parallel.bucket_cap_mb / 4;
  trade(fmt::format("parallel.bucket_cap_mb = {:g}", cap_mb),
        [cap_mb](Config& c) { c.parallel.bucket_cap_mb = cap_mb; });
  // Hybrid sharding: alone, the smallest larger group that divides the world and link.ranks (a
  // multiple of this one, so that groups stay whole nodes); together, one group of every rank,
  // which more ranks then shard further.
  if (const int group = config.parallel.shard_group; group > 0) {
    for (int larger = 2 * group; larger <= world; larger += group) {
      Config c = config;
      c.parallel.shard_group = larger;
      const bool valid = world % larger == 0 && config.link.ranks % larger == 0;
      if (valid && consider(fmt::format("parallel.shard_group = {}", larger), c)) {
        break;
      }
    }
    all.parallel.shard_group = 0;
    all_keys.push_back("parallel.shard_group = 0");
  }
  const bool all_fit = fits.empty() ? consider(fmt::format("{}", fmt::join(all_keys, ", ")), all)
                                     : peak(all, world).total() <= limit;
  if (const int w = ranks_that_fit(config, world, limit); w > 0) {
    fits.push_back(fmt::format("{} ranks ({} on the largest rank)", w,
                               human_bytes(peak(config, w).total())));
  } else if (const int wa = all_fit ? 0 : ranks_that_fit(all, world, limit); wa > 0) {
    fits.push_back(fmt::format("{} ranks with {} ({} on the largest rank)", wa,
                               fmt::join(all_keys, ", "), human_bytes(peak(all, wa).total())));
  }
  const std::string fix =
      fits.empty() ? fmt::format("none of a higher ZeRO stage, bf16, smaller buckets{} fits; "
                                 "lower {}, or raise runtime.memory_limit_mb",
                                 config.parallel.shard_group > 0
                                     ? ", one shard group of every rank or more ranks in it"
                                     : " or up to 4096 ranks",
                                 keys_to_lower(need, limit))
                   : fmt::format("it fits with {}; or raise runtime.memory_limit_mb",
                                 fmt::join(fits, "; or "));
  throw UserError(fmt::format(
      "{}: {} needs an estimated {}, above runtime.memory_limit_mb = {:g} ({}): {}",
      where_set(config, "runtime.memory_limit_mb"),
      world == 1 ? std::string("the one rank") : fmt::format("the largest of {} ranks", world),
      describe_memory(need), config.runtime.memory_limit_mb, human_bytes(limit), fix));
}

}  // namespace zl
