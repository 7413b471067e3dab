// Mode: name, parse, the list of every mode and the shard group's check against the world (see
// Note [Mode value] in mode.h).
#include "runtime/config/mode.h"

#include <charconv>

#include <fmt/format.h>

#include "base/errors.h"

namespace zl {

Ownership Mode::ownership() const {
  if (ddp()) return Ownership::Replicated;
  return collective == CollectiveKind::ReduceScatterAllgather ? Ownership::Element
                                                              : Ownership::Bucket;
}

std::string Mode::name() const {
  if (ddp()) return to_string(ParallelMode::Ddp);
  if (shard_group > 0) return fmt::format("hsdp{}/{}@{}", stage, to_string(overlap), shard_group);
  return fmt::format("{}{}/{}/{}", to_string(ParallelMode::Zero),
                     stage >= 2 ? std::to_string(stage) : "", to_string(overlap),
                     to_string(collective));
}

Mode mode_of(const ParallelConfig& parallel) {
  if (parallel.mode == ParallelMode::Ddp) return Mode{};
  const bool element = parallel.collective == CollectiveKind::ReduceScatterAllgather;
  return Mode{.stage = element ? parallel.zero_stage : 1,
              .overlap = parallel.overlap,
              .collective = parallel.collective,
              .shard_group = element ? parallel.shard_group : 0};
}

void set_mode(ParallelConfig& parallel, const Mode& mode) {
  parallel.mode = mode.ddp() ? ParallelMode::Ddp : ParallelMode::Zero;
  parallel.overlap = mode.overlap;
  parallel.collective = mode.collective;
  parallel.zero_stage = std::max(mode.stage, 1);
  parallel.shard_group = mode.shard_group;
}

std::vector<Mode> all_modes(const std::vector<int>& shard_groups) {
  constexpr Overlap kOverlaps[] = {Overlap::None, Overlap::AfterBackward, Overlap::Interleaved};
  constexpr CollectiveKind kCollectives[] = {CollectiveKind::AllreduceBroadcast,
                                             CollectiveKind::ReduceBroadcast,
                                             CollectiveKind::ReduceScatterAllgather};
  std::vector<int> groups{0};  // 0: the flat modes
  for (const int group : shard_groups) {
    ZL_CHECK(group > 0, "all_modes: shard group {} is not a group size (the flat modes are always "
             "listed)", group);
    groups.push_back(group);
  }
  std::vector<Mode> modes{Mode{}};
  for (const int group : groups) {
    for (const int stage : {1, 2, 3}) {
      for (const Overlap o : kOverlaps) {
        for (const CollectiveKind c : kCollectives) {
          // Bucket collectives: stage 1 of the flat modes only.
          if (c != CollectiveKind::ReduceScatterAllgather && (stage > 1 || group > 0)) continue;
          modes.push_back({.stage = stage, .overlap = o, .collective = c, .shard_group = group});
        }
      }
    }
  }
  return modes;
}

std::optional<Mode> parse_mode(std::string_view name) {
  // "hsdp<stage>/<overlap>@<G>": the flat mode of that stage and overlap with shard group G.
  std::vector<int> groups;
  if (name.starts_with("hsdp")) {
    const std::size_t at = name.rfind('@');
    if (at == std::string_view::npos) return std::nullopt;
    int group = 0;
    const std::string_view digits = name.substr(at + 1);
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), group);
    if (ec != std::errc{} || end != digits.data() + digits.size() || group < 1) {
      return std::nullopt;
    }
    groups.push_back(group);
  }
  for (const Mode& m : all_modes(groups)) {
    if (m.name() == name) return m;
  }
  return std::nullopt;
}

void check_shard_group(const Config& config, int world) {
  const int group = config.parallel.shard_group;
  if (group == 0) return;
  const int modelled = config.link.ranks;  // 0: the world; else link.ranks / G modelled replicas
  const std::string where = where_set(config, "parallel.shard_group");
  // Above or below the world size (the config reader checks a configured shard group; this holds
  // it for the bench's hybrid modes too): the link model's spans need it (link_span).
  if (world % group == 0 && modelled > 0 && modelled % group != 0) {
    throw UserError(fmt::format(
        "{}: parallel.shard_group = {} does not divide link.ranks = {}, the ranks the link "
        "model times this job as: set link.ranks to a multiple of {}",
        where, group, modelled, group));
  }
  // The study times more replicas of real groups, and their all-reduce runs only between real
  // groups: with one group there is none to time.
  if (group == world && modelled > world) {
    throw UserError(fmt::format(
        "{}: parallel.shard_group = {} is every rank of this job, one group, but link.ranks = {} "
        "times it as {} replicas of that group, whose all-reduce runs only between real groups: "
        "run at least two groups, or set parallel.shard_group = 0 for the flat study of {} ranks",
        where, group, modelled, modelled / group, modelled));
  }
  if (world % group == 0) return;
  throw UserError(fmt::format(
      "{}: parallel.shard_group = {} does not divide the world of {} rank{} (a world splits into "
      "groups of that many consecutive ranks): set a divisor of {} (or 0 for one group of every "
      "rank)",
      where, group, world, world == 1 ? "" : "s", world));
}

}  // namespace zl
