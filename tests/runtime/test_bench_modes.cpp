// Which modes `zerolap bench` runs: all ten by default, without the interleaved ones when the
// config clips gradients (they cannot), and a clear error for a listed mode that cannot run.
#include <catch2/catch.hpp>

#include "base/errors.h"
#include "runtime/bench/bench.h"
#include "runtime/config/config.h"

using namespace zl;

namespace {
const char* kConfig = R"([model]
widths = [2, 8, 3]
[data]
kind = "spirals"
)";
}  // namespace

TEST_CASE("bench runs every mode that can run the config", "[bench-modes]") {
  const auto all = bench_modes(parse_config(kConfig, "b.toml"));
  CHECK(all.size() == 10);  // ddp, zero x 3 overlaps x 3 collectives
  int shards = 0;
  for (const auto& m : all) shards += m.collective == CollectiveKind::ReduceScatterAllgather;
  CHECK(shards == 3);
  const auto clipped = bench_modes(parse_config(kConfig, "b.toml", {"train.clip_grad_norm=1.0"}));
  CHECK(clipped.size() == 7);
  for (const auto& m : clipped) CHECK(m.overlap != Overlap::Interleaved);
  CHECK_THROWS_WITH(
      bench_modes(parse_config(kConfig, "b.toml",
                               {"train.clip_grad_norm=1.0",
                                "bench.modes=[\"zero/interleaved/reduce_broadcast\"]"})),
      Catch::Contains("interleaved overlap cannot clip"));
}
