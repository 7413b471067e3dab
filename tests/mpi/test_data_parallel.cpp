// Data-parallel equivalence (docs/design.md invariants 2, 3, 4, 6): every mode, collective and
// assignment on N ranks x local batch B gives the parameters of 1 rank x batch N*B with a local
// optimizer on the same samples, within rtol 1e-5, for bucket caps from one layer per bucket
// to a single bucket; all ranks hold bitwise-identical parameters after every step.
#include <catch2/catch.hpp>

#include <map>

#include "kernels/cpu_team.h"
#include "mpi_test_util.h"

using namespace zl;
using namespace zl::test;

namespace {

constexpr double kRtol = 1e-5;
// Parameters that pass through zero need an absolute floor; 1e-6 is ~1e-4 of a typical weight.
constexpr double kAtol = 1e-6;
constexpr int kSteps = 20;

struct OptimizerCase {
  const char* name;
  std::vector<std::string> overrides;
};

const std::vector<OptimizerCase>& optimizer_cases() {
  static const std::vector<OptimizerCase> cases = {
      {"adam+wd", {"optimizer.kind=adam", "optimizer.lr=0.01", "optimizer.weight_decay=0.01"}},
      {"adamw", {"optimizer.kind=adamw", "optimizer.lr=0.01", "optimizer.weight_decay=0.1"}},
      {"sgd nesterov+wd",
       {"optimizer.kind=sgd", "optimizer.lr=0.1", "optimizer.momentum=0.9",
        "optimizer.nesterov=true", "optimizer.weight_decay=0.001"}},
      {"sgd dampening",
       {"optimizer.kind=sgd", "optimizer.lr=0.1", "optimizer.momentum=0.9",
        "optimizer.dampening=0.1"}},
  };
  return cases;
}

// Caps in MiB: one layer per bucket (a bucket never splits a layer), a few layers per bucket,
// everything in one bucket.
const std::vector<std::pair<std::string, std::string>> kCaps = {
    {"1e-7", "1e-7"}, {"0.004", "0.001"}, {"25.0", "25.0"}};

// 1 rank x batch N*B, ddp with a local optimizer, on a world of one.
std::vector<float> reference_parameters(const std::vector<std::string>& overrides, int world_size) {
  const Config base = small_config(overrides);
  auto ref_overrides = with(overrides, {"parallel.mode=ddp", "parallel.overlap=none",
                                        "data.batch_size=" + std::to_string(base.data.batch_size * world_size)});
  Trainer ref(small_config(ref_overrides), world_of(MPI_COMM_SELF), quiet_options());
  for (int s = 0; s < kSteps; ++s) ref.train_step();
  return parameters_of(ref);
}

// ddp, and every overlap x bucket collective once. The assignment (which rank owns a bucket) is
// chosen so that every overlap and every collective meets both assignments: each pair of values
// is covered, at half the runs of the full product.
std::vector<std::vector<std::string>> mode_cases() {
  std::vector<std::vector<std::string>> modes = mode_overrides(ddp_or_bucket_owned);
  // In all_modes()'s order the bucket modes come as overlap x {allreduce_broadcast,
  // reduce_broadcast}: bucket mode i gets this assignment.
  for (std::size_t i = 1; i < modes.size(); ++i) {
    const std::size_t index = i - 1;
    modes[i].push_back((index / 2 + index) % 2 == 0 ? "parallel.assignment=round_robin"
                                                    : "parallel.assignment=greedy");
  }
  return modes;
}

}  // namespace

TEST_CASE("every mode matches one rank with the global batch, ranks stay identical",
          "[equivalence]") {
  const World world = world_of(MPI_COMM_WORLD);
  for (const auto& opt : optimizer_cases()) {
    const std::vector<float> reference = reference_parameters(opt.overrides, world.size);
    for (const auto& mode : mode_cases()) {
      for (const auto& [cap, first_cap] : kCaps) {
        const auto overrides =
            with(with(opt.overrides, mode), {"parallel.bucket_cap_mb=" + cap, "parallel.first_bucket_cap_mb=" + first_cap});
        INFO("world " << world.size << ", " << opt.name << ": " << describe(overrides));
        Trainer trainer(small_config(overrides), world, quiet_options());
        const std::vector<float> initial = parameters_of(trainer);
        trainer.train_step();
        // Every iteration updates the parameters, including the first.
        CHECK(fnv1a(parameters_of(trainer)) != fnv1a(initial));
        const std::vector<float> final = train_checking_identity(trainer, kSteps - 1);
        CHECK(tolerance_ratio(final, reference, kRtol, kAtol) <= 1.0);
      }
    }
  }
}

TEST_CASE("the residual model with LayerNorm matches too", "[equivalence]") {
  const World world = world_of(MPI_COMM_WORLD);
  const std::vector<std::string> model = {"model.kind=residual_mlp", "model.widths=[8,16,16,16,4]"};
  const auto reference = reference_parameters(model, world.size);
  for (const auto& mode : mode_cases()) {
    const auto overrides = with(with(model, mode), {"parallel.bucket_cap_mb=0.001",
                                                    "parallel.first_bucket_cap_mb=0.0001"});
    INFO("world " << world.size << ": " << describe(overrides));
    Trainer trainer(small_config(overrides), world, quiet_options());
    const auto final = train_checking_identity(trainer, kSteps);
    CHECK(tolerance_ratio(final, reference, kRtol, kAtol) <= 1.0);
  }
}

TEST_CASE("the same config gives bitwise-identical parameters run to run", "[determinism]") {
  const World world = world_of(MPI_COMM_WORLD);
  for (const char* overlap : {"none", "interleaved"}) {
    const std::vector<std::string> overrides = {"parallel.mode=zero",
                                                std::string("parallel.overlap=") + overlap,
                                                "parallel.bucket_cap_mb=0.001"};
    INFO(describe(overrides));
    std::vector<float> runs[2];
    for (auto& run : runs) {
      Trainer trainer(small_config(overrides), world, quiet_options());
      for (int s = 0; s < kSteps; ++s) trainer.train_step();
      run = parameters_of(trainer);
    }
    CHECK(fnv1a(runs[0]) == fnv1a(runs[1]));
  }
}

// With runtime.threads = "auto" the team shrinks and grows between steps with the machine's load
// (Note [Adaptive CPU team], runtime/cli/cpu_team_governor.cpp); the parameters must not
// depend on it. A model large enough that its GEMMs and its optimizer step split across 2
// threads, run on 2 threads with a fixed team, then with the team changed before every step
// (2, 1, 1, 2, ...), gives the same bits.
TEST_CASE("the CPU team changing between steps leaves the parameters bitwise unchanged", "[team]") {
  const World world = world_of(MPI_COMM_WORLD);
  const std::vector<std::string> overrides = {"model.widths=[784,256,256,10]", "runtime.threads=2",
                                              "data.batch_size=64", "data.teacher_hidden=16",
                                              "parallel.mode=zero", "parallel.overlap=interleaved"};
  const auto run = [&](bool vary) {
    Trainer trainer(small_config(overrides), world, quiet_options());
    for (int s = 0; s < 8; ++s) {
      if (vary) set_cpu_team_limit(s % 3 == 0 ? 2 : 1);
      trainer.train_step();
    }
    set_cpu_team_limit(0);
    return fnv1a(parameters_of(trainer));
  };
  const std::uint64_t fixed = run(false);
  CHECK(run(true) == fixed);
}
