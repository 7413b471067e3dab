// Which modes `zerolap bench` runs: all thirteen by default, without the interleaved ones when the
// config clips gradients or skips non-finite steps (they cannot), and a clear error when the config
// is read for a listed mode that cannot run or does not exist.
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
  // ddp, zero x 3 overlaps x 3 collectives, zero2 and zero3 x 3 overlaps
  CHECK(all.size() == 16);
  int shards = 0, stage2 = 0, stage3 = 0;
  for (const auto& m : all) {
    shards += m.collective == CollectiveKind::ReduceScatterAllgather;
    stage2 += m.stage == 2;
    stage3 += m.stage == 3;
  }
  CHECK(shards == 9);
  CHECK(stage2 == 3);
  CHECK(stage3 == 3);
  CHECK(all.back().name() == "zero3/interleaved/reduce_scatter_allgather");
  const auto clipped = bench_modes(parse_config(kConfig, "b.toml", {"train.clip_grad_norm=1.0"}));
  CHECK(clipped.size() == 11);
  for (const auto& m : clipped) CHECK(m.overlap != Overlap::Interleaved);
  CHECK_THROWS_WITH(
      parse_config(kConfig, "b.toml",
                   {"train.clip_grad_norm=1.0",
                    "bench.modes=[\"zero/interleaved/reduce_broadcast\"]"}),
      Catch::Contains("bench.modes: lists \"zero/interleaved/reduce_broadcast\" but "
                      "train.clip_grad_norm = 1 (at --set ") &&
          Catch::Contains("interleaved overlap cannot clip; set train.clip_grad_norm = 0"));
}

TEST_CASE("bench leaves out the interleaved modes when the config skips non-finite steps",
          "[bench-modes]") {
  const auto skipping =
      bench_modes(parse_config(kConfig, "b.toml", {"train.on_nonfinite=\"skip_step\""}));
  CHECK(skipping.size() == 11);
  for (const auto& m : skipping) CHECK(m.overlap != Overlap::Interleaved);
  const std::vector<std::string> listed{
      "train.on_nonfinite=\"skip_step\"",
      "bench.modes=[\"ddp\", \"zero/interleaved/allreduce_broadcast\"]"};
  CHECK_THROWS_WITH(parse_config(kConfig, "b.toml", listed),
                    Catch::Contains("bench.modes: lists \"zero/interleaved/allreduce_broadcast\" "
                                    "but train.on_nonfinite = \"skip_step\""));
}

TEST_CASE("bench.modes accepts exactly the bench's mode names, checked when the config is read",
          "[bench-modes]") {
  std::vector<std::string> names;
  for (const Mode& m : all_modes()) {
    names.push_back(m.name());
    CHECK(parse_mode(m.name()) == m);
  }
  CHECK_FALSE(parse_mode("zero2/none/reduce_broadcast"));
  // Shard groups are group sizes: 0 would list the flat modes a second time.
  CHECK_THROWS_AS(all_modes({0}), InternalError);
  CHECK_FALSE(parse_mode("hsdp1/none@0"));
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "\"" : ", \"") + n + "\"";
  const auto listed = bench_modes(parse_config(kConfig, "b.toml", {"bench.modes=[" + list + "]"}));
  REQUIRE(listed.size() == names.size());
  for (std::size_t i = 0; i < names.size(); ++i) CHECK(listed[i].name() == names[i]);
  CHECK_THROWS_WITH(parse_config(kConfig, "b.toml", {"bench.modes=[\"zero/overlap/ring\"]"}),
                    Catch::Contains("bench.modes: unknown mode \"zero/overlap/ring\"; the modes "
                                    "are \"ddp\", \"zero/none/allreduce_broadcast\""));
}

TEST_CASE("bench: the link.ranks study of element shards is refused on CUDA, naming its modes",
          "[bench-modes]") {
  const Config c = parse_config(kConfig, "b.toml",
                                {"link.bandwidth_gbps=100", "link.ranks=8",
                                 "bench.modes=[\"ddp\", \"zero/none/reduce_scatter_allgather\"]"});
  const std::vector<Mode> modes = bench_modes(c);
  CHECK_NOTHROW(check_bench_study_device(c, modes, 1, DeviceKind::Cpu));
  REQUIRE_THROWS_AS(check_bench_study_device(c, modes, 1, DeviceKind::Cuda), UserError);
  REQUIRE_THROWS_WITH(check_bench_study_device(c, modes, 1, DeviceKind::Cuda),
                      Catch::StartsWith("--set link.ranks: link.ranks = 8") &&
                          Catch::Contains("\"zero/none/reduce_scatter_allgather\"") &&
                          !Catch::Contains("\"ddp\"") && Catch::Contains("runtime.device"));
  // The study's ranks at most the world: no study, nothing to refuse.
  CHECK_NOTHROW(check_bench_study_device(c, modes, 8, DeviceKind::Cuda));
}

TEST_CASE("bench: link.ranks must be a multiple of each hybrid mode's shard group",
          "[bench-modes]") {
  // link.ranks = 3 below the world of 4 with hsdp@2 is a UserError naming the mode: the
  // modelled replicas of groups of 2 need link.ranks to be a multiple of 2.
  const auto config = [](const std::string& ranks) {
    return parse_config(kConfig, "b.toml",
                        {"link.bandwidth_gbps=10", "link.ranks=" + ranks,
                         "bench.modes=[\"ddp\", \"hsdp1/none@2\"]"});
  };
  for (const char* ranks : {"1", "3", "5"}) {
    DYNAMIC_SECTION("link.ranks = " << ranks) {
      REQUIRE_THROWS_AS(check_bench_shard_groups(config(ranks), 4), UserError);
      REQUIRE_THROWS_WITH(check_bench_shard_groups(config(ranks), 4),
                          Catch::Contains("bench.modes: \"hsdp1/none@2\"") &&
                              Catch::Contains("parallel.shard_group = 2") &&
                              Catch::Contains(std::string("link.ranks = ") + ranks));
    }
  }
  CHECK_NOTHROW(check_bench_shard_groups(config("2"), 4));
  CHECK_NOTHROW(check_bench_shard_groups(config("8"), 4));
}
