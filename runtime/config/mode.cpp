// Mode: name, parse and the list of every mode (see Note [Mode value] in mode.h).
#include "runtime/config/mode.h"

#include <algorithm>

#include <fmt/format.h>

namespace zl {

Ownership Mode::ownership() const {
  if (ddp()) return Ownership::Replicated;
  return collective == CollectiveKind::ReduceScatterAllgather ? Ownership::Element
                                                              : Ownership::Bucket;
}

std::string Mode::name() const {
  if (ddp()) return to_string(ParallelMode::Ddp);
  return fmt::format("{}{}/{}/{}", to_string(ParallelMode::Zero),
                     stage >= 2 ? std::to_string(stage) : "", to_string(overlap),
                     to_string(collective));
}

Mode mode_of(const ParallelConfig& parallel) {
  if (parallel.mode == ParallelMode::Ddp) return Mode{};
  const bool element = parallel.collective == CollectiveKind::ReduceScatterAllgather;
  return Mode{.stage = element ? parallel.zero_stage : 1,
              .overlap = parallel.overlap,
              .collective = parallel.collective};
}

void set_mode(ParallelConfig& parallel, const Mode& mode) {
  parallel.mode = mode.ddp() ? ParallelMode::Ddp : ParallelMode::Zero;
  parallel.overlap = mode.overlap;
  parallel.collective = mode.collective;
  parallel.zero_stage = std::max(mode.stage, 1);
}

std::vector<Mode> all_modes() {
  std::vector<Mode> modes{Mode{}};
  constexpr Overlap kOverlaps[] = {Overlap::None, Overlap::AfterBackward, Overlap::Interleaved};
  for (const Overlap o : kOverlaps) {
    for (const CollectiveKind c : {CollectiveKind::AllreduceBroadcast,
                                   CollectiveKind::ReduceBroadcast,
                                   CollectiveKind::ReduceScatterAllgather}) {
      modes.push_back({.stage = 1, .overlap = o, .collective = c});
    }
  }
  for (const int stage : {2, 3}) {
    for (const Overlap o : kOverlaps) {
      modes.push_back({.stage = stage, .overlap = o,
                       .collective = CollectiveKind::ReduceScatterAllgather});
    }
  }
  return modes;
}

std::optional<Mode> parse_mode(std::string_view name) {
  for (const Mode& m : all_modes()) {
    if (m.name() == name) return m;
  }
  return std::nullopt;
}

}  // namespace zl
