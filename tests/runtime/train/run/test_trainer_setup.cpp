// What a training run cannot do, refused at start-up before any communicator is built
// (check_trainable, runtime/train/run/trainer_setup.h): the link.ranks timing study writes no
// checkpoints, and runs on the CPU only.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "base/errors.h"
#include "runtime/config/config.h"
#include "runtime/train/plan/mode_plan.h"
#include "runtime/train/run/trainer_setup.h"

using namespace zl;
using Catch::Contains;

namespace {

Config study_config(const std::vector<std::string>& extra) {
  std::vector<std::string> all{"parallel.mode=zero", "parallel.collective=reduce_scatter_allgather",
                               "link.bandwidth_gbps=100", "link.ranks=8"};
  all.insert(all.end(), extra.begin(), extra.end());
  return parse_config("[model]\nwidths = [2, 16, 3]\n[data]\nkind = \"spirals\"\n", "s.toml", all);
}

}  // namespace

TEST_CASE("the link.ranks timing study is refused with checkpoints or on CUDA", "[trainer]") {
  const Config study = study_config({});
  const ModePlan mode = make_run_mode_plan(study, 2);
  CHECK_NOTHROW(check_trainable(study, mode, 2, DeviceKind::Cpu));
  // On a GPU the link model delays the comm stream by the bytes a rank issues, not by the whole
  // buckets the study stands for: refused (exit 2) rather than an internal error at set-up.
  REQUIRE_THROWS_AS(check_trainable(study, mode, 2, DeviceKind::Cuda), UserError);
  REQUIRE_THROWS_WITH(check_trainable(study, mode, 2, DeviceKind::Cuda),
                      Contains("--set link.ranks: link.ranks = 8") &&
                          Contains("runtime.device = \"cpu\""));
  const Config with_checkpoints = study_config({"checkpoint.dir=/tmp/ck"});
  REQUIRE_THROWS_WITH(check_trainable(with_checkpoints, mode, 2, DeviceKind::Cpu),
                      Contains("writes no checkpoints") && !Contains("CPU only"));
  REQUIRE_THROWS_WITH(check_trainable(with_checkpoints, mode, 2, DeviceKind::Cuda),
                      Contains("writes no checkpoints") && Contains("CPU only"));
  // Real ranks only (link.ranks at most the world): no study, nothing to refuse.
  const Config real = study_config({"link.ranks=2"});
  CHECK_NOTHROW(check_trainable(real, make_run_mode_plan(real, 2), 2, DeviceKind::Cuda));
}
