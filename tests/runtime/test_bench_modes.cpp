// Which modes `zerolap bench` runs: all seven by default, without the interleaved ones when the
// config clips gradients or skips non-finite steps (they cannot), and a clear error for a listed
// mode that cannot run or does not exist.
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
  CHECK(bench_modes(parse_config(kConfig, "b.toml")).size() == 7);
  const auto clipped = bench_modes(parse_config(kConfig, "b.toml", {"train.clip_grad_norm=1.0"}));
  CHECK(clipped.size() == 5);
  for (const auto& m : clipped) CHECK(m.overlap != Overlap::Interleaved);
  CHECK_THROWS_WITH(
      bench_modes(parse_config(kConfig, "b.toml",
                               {"train.clip_grad_norm=1.0",
                                "bench.modes=[\"zero/interleaved/reduce_broadcast\"]"})),
      Catch::Contains("interleaved overlap cannot clip"));
}

TEST_CASE("bench leaves out the interleaved modes when the config skips non-finite steps",
          "[bench-modes]") {
  const auto skipping =
      bench_modes(parse_config(kConfig, "b.toml", {"train.on_nonfinite=\"skip_step\""}));
  CHECK(skipping.size() == 5);
  for (const auto& m : skipping) CHECK(m.overlap != Overlap::Interleaved);
  const std::vector<std::string> listed{
      "train.on_nonfinite=\"skip_step\"",
      "bench.modes=[\"ddp\", \"zero/interleaved/allreduce_broadcast\"]"};
  CHECK_THROWS_WITH(bench_modes(parse_config(kConfig, "b.toml", listed)),
                    Catch::Contains("bench.modes lists \"zero/interleaved/allreduce_broadcast\" "
                                    "but train.on_nonfinite = \"skip_step\""));
}
