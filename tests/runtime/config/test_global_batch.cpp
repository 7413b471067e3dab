// The split of data.global_batch_size (runtime/config/global_batch.h): the largest per-rank batch
// up to data.batch_size that makes batch x world x grad_accum exact; no split: exit 2 naming the
// world sizes that work; grad_accum set beside it is refused; to_toml keeps the configured values.
#include <catch2/catch.hpp>

#include "base/errors.h"
#include "runtime/config/config.h"
#include "runtime/config/global_batch.h"

using Catch::Contains;
using namespace zl;

namespace {
const char* kConfig = "[model]\nwidths = [2, 4, 3]\n[data]\nkind = \"spirals\"\nbatch_size = 16\n"
                      "global_batch_size = 96\n";
}

TEST_CASE("the global batch splits into the largest per-rank batch that is exact", "[config]") {
  const auto split = [](std::int64_t g, std::int64_t b, std::int64_t w) {
    const BatchSplit s = split_global_batch(g, b, w, "c.toml");
    CHECK(s.per_rank * w * s.grad_accum == g);
    return std::pair{s.per_rank, s.grad_accum};
  };
  CHECK(split(64, 16, 4) == std::pair<std::int64_t, std::int64_t>{16, 1});
  CHECK(split(64, 16, 2) == std::pair<std::int64_t, std::int64_t>{16, 2});
  CHECK(split(64, 16, 1) == std::pair<std::int64_t, std::int64_t>{16, 4});
  CHECK(split(96, 16, 4) == std::pair<std::int64_t, std::int64_t>{12, 2});  // 24 per rank
  CHECK(split(96, 64, 3) == std::pair<std::int64_t, std::int64_t>{32, 1});
  CHECK(split(96, 16, 96) == std::pair<std::int64_t, std::int64_t>{1, 1});
  CHECK_THROWS_WITH(split_global_batch(64, 16, 3, "c.toml"),
                    Contains("c.toml") && Contains("data.global_batch_size = 64") &&
                        Contains("3 ranks") && Contains("world sizes that work: 1, 2, 4, 8, 16, 32, 64"));
  CHECK_THROWS_WITH(split_global_batch(std::int64_t{1} << 30, 1, 1, "c.toml"),
                    Contains("raise data.batch_size"));
}

TEST_CASE("apply_global_batch derives the split and keeps the configured values", "[config]") {
  Config c = parse_config(kConfig, "c.toml");
  const std::string saved = to_toml(c);
  apply_global_batch(c, 4);
  CHECK(c.data.batch_size == 12);
  CHECK(c.train.grad_accum == 2);
  CHECK(to_toml(c) == saved);
  apply_global_batch(c, 2);  // idempotent over the configured values
  CHECK(c.data.batch_size == 16);
  CHECK(c.train.grad_accum == 3);
  Config off = parse_config("[model]\nwidths = [2, 4, 3]\n[data]\nkind = \"spirals\"\n", "d.toml");
  apply_global_batch(off, 4);
  CHECK(off.data.batch_size == 64);
  CHECK(off.train.grad_accum == 1);
  // Both set: refused when the config is read, at any world size (test_config.cpp).
  CHECK_THROWS_WITH(parse_config(kConfig, "c.toml", {"train.grad_accum=2"}),
                    Contains("train.grad_accum: 2") && Contains("data.global_batch_size = 96"));
  Config none = parse_config(kConfig, "c.toml");
  CHECK_THROWS_WITH(apply_global_batch(none, 5), Contains("world sizes that work: 1, 2, 3, 4, 6, 8"));
}
