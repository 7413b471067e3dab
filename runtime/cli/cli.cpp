// run_cli: argument parsing, MPI start-up and the error-to-exit-code policy of `zerolap`.
#include "runtime/cli/cli.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <exception>
#include <optional>

#include "base/errors.h"
#include "runtime/cli/commands.h"
#include "runtime/cli/gemm_check.h"
#include "runtime/comm/world.h"

namespace zl {
namespace {

constexpr int kExitRuntimeFailure = 1;
constexpr int kExitBadInput = 2;

void add_config_args(CLI::App& cmd, ConfigArgs& args) {
  cmd.add_option("config", args.path, "TOML config file")->required();
  cmd.add_option("--set", args.overrides,
                 "Override a config key: --set section.key=value (value read as TOML; a bare "
                 "word is a string). Repeatable.")
      ->type_name("KEY=VALUE");
}

}  // namespace

int run_cli(int argc, char** argv) {
  CLI::App app{
      "zerolap: data-parallel training with a sharded (ZeRO) optimizer and per-bucket "
      "communication overlap. Run under mpirun for several ranks:\n"
      "  mpirun -np 4 zerolap train configs/fashion_mnist_mlp.toml",
      "zerolap"};
  app.set_version_flag("--version", [] { return version_text(); });  // names the CPU GEMM
  app.require_subcommand(1);

  ConfigArgs train_args, plan_args, bench_args;
  int plan_world = 0;
  auto* train = app.add_subcommand("train", "Train a model from a TOML config");
  add_config_args(*train, train_args);
  auto* plan = app.add_subcommand("plan", "Print the gradient bucket plan and per-rank state");
  add_config_args(*plan, plan_args);
  plan->add_option("--world", plan_world, "Plan for this many ranks (default: the job's size)")
      ->check(CLI::PositiveNumber);
  PlanOptions plan_options;
  plan->add_option("--link-gbps", plan_options.link_gbps,
                   "Model a link of this bandwidth (Gb/s): per-mode memory and communication per "
                   "step (overrides link.bandwidth_gbps)")
      ->check(CLI::PositiveNumber);
  plan->add_option("--latency-us", plan_options.latency_us,
                   "The modelled link's latency per hop (us; overrides link.latency_us)")
      ->check(CLI::NonNegativeNumber);
  plan->add_option("--compute-ms", plan_options.compute_ms,
                   "A measured compute time per step (ms, e.g. the bench's compute column): "
                   "predicts step time and scaling efficiency at 8, 64 and 512 ranks")
      ->check(CLI::PositiveNumber);
  auto* bench = app.add_subcommand(
      "bench", "Measure every overlap mode x bucket cap of the config's [bench] side by side");
  add_config_args(*bench, bench_args);
  bool bench_wide = false;
  bench->add_flag("--wide", bench_wide,
                  "Print every column (wider than 100 columns); bench.json and bench.csv always "
                  "have them all");
  std::string inspect_path;
  auto* inspect = app.add_subcommand("inspect", "List the tensors and metadata of a checkpoint");
  inspect->add_option("file", inspect_path,
                      "A .safetensors checkpoint, or a checkpoint directory or its `latest` "
                      "pointer (the latest checkpoint)")
      ->required();

  // An unknown first word is named (CLI11 would only say that a subcommand is required).
  const auto is_command = [&](const char* word) {
    for (const CLI::App* sub : {train, plan, bench, inspect}) {
      if (sub->get_name() == word) return true;
    }
    return false;
  };
  if (argc > 1 && argv[1][0] != '-' && !is_command(argv[1])) {
    std::fprintf(stderr,
                 "zerolap: error: unknown command '%s' (the commands: train, plan, bench, "
                 "inspect; see zerolap --help)\n",
                 argv[1]);
    return kExitBadInput;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitBadInput;
  }

  MpiSession session(&argc, &argv);
  const World& world = session.world();
  try {
    if (*train) return run_train_command(train_args, world);
    if (*plan) return run_plan_command(plan_args, plan_world, world, plan_options);
    if (*bench) {
      return run_bench_command(bench_args, world,
                               bench_wide ? TableWidth::Wide : TableWidth::Narrow);
    }
    if (*inspect) return run_inspect_command(inspect_path, world);
    return kExitBadInput;
  } catch (const ReportedUserError&) {
    return kExitBadInput;  // every rank agreed; the message is out; MPI finalises cleanly
  } catch (const UserError& e) {
    abort_job(world, kExitBadInput, e.what());
  } catch (const std::exception& e) {
    abort_job(world, kExitRuntimeFailure, e.what());
  }
}

}  // namespace zl
