// run_cli: argument parsing, MPI start-up and the error-to-exit-code policy of `zerolap`.
#include "runtime/cli/cli.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <exception>
#include <system_error>

#include "base/errors.h"
#include "base/standard_output.h"
#include "runtime/cli/commands.h"
#include "runtime/cli/gemm_check.h"
#include "runtime/comm/startup_watchdog.h"
#include "runtime/comm/world.h"
#include "runtime/config/config.h"
#include "runtime/config/config_limits.h"

namespace zl {
namespace {

// A number flag's check: finite and in (lo, hi], bounds printed readably (CLI11's own ranges let
// NaN through, since every comparison with it is false).
CLI::Validator finite_in(const char* flag, double lo, double hi) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        double v = 0.0;
        std::size_t used = 0;
        try {
          v = std::stod(text, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used != text.size() || !std::isfinite(v) || !(v > lo) || !(v <= hi)) {
          return fmt::format("{} must be a finite number in ({:g}, {:g}] (got '{}')", flag, lo, hi,
                             text);
        }
        return {};
      },
      fmt::format("in ({:g}, {:g}]", lo, hi));
}

// runtime.timeout_s of the command's config, for the start-up watchdog; the default where there
// is no config or it does not load (its error is reported, on every rank, once MPI is up).
double startup_timeout_s(const ConfigArgs* args) {
  if (args != nullptr) {
    try {
      return load_config(args->path, args->overrides).runtime.timeout_s;
    } catch (const std::exception&) {
    }
  }
  return RuntimeConfig{}.timeout_s;
}

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

  ConfigArgs train_args, plan_args, bench_args, config_args;
  int plan_world = 0;
  auto* train = app.add_subcommand("train", "Train a model from a TOML config");
  add_config_args(*train, train_args);
  auto* plan = app.add_subcommand("plan", "Print the gradient bucket plan and per-rank state");
  add_config_args(*plan, plan_args);
  plan->add_option("--world", plan_world, "Plan for this many ranks (default: the job's size)")
      ->check(CLI::Range(1, static_cast<int>(kMaxWorldSize)));
  PlanOptions plan_options;
  plan->add_option("--link-gbps", plan_options.link_gbps,
                   "Model a link of this bandwidth (Gb/s): per-mode memory and communication per "
                   "step (overrides link.bandwidth_gbps, and has its range)")
      ->type_name("FLOAT");
  plan->add_option("--latency-us", plan_options.latency_us,
                   "The modelled link's latency per hop (us; overrides link.latency_us, and has "
                   "its range)")
      ->type_name("FLOAT");
  plan->add_option("--node-ranks", plan_options.node_ranks,
                   "Model nodes of this many consecutive ranks (overrides link.node_ranks, and "
                   "has its range): each tier's bytes and time, and hybrid rows with a shard "
                   "group per node (--set parallel.shard_group=G chooses another)")
      ->type_name("INT");
  plan->add_option("--intra-gbps", plan_options.intra_gbps,
                   "The bandwidth inside a modelled node (Gb/s; overrides link.intra_gbps, and "
                   "has its range)")
      ->type_name("FLOAT");
  plan->add_option("--compute-ms", plan_options.compute_ms,
                   "A measured compute time per step (ms, e.g. the bench's compute column): "
                   "predicts step time and scaling efficiency at 8, 64 and 512 ranks")
      ->check(finite_in("--compute-ms", 0.0, kMaxComputeMs));
  auto* bench = app.add_subcommand(
      "bench", "Measure every overlap mode x bucket cap of the config's [bench] side by side");
  add_config_args(*bench, bench_args);
  bool bench_wide = false;
  bench->add_flag("--wide", bench_wide,
                  "Print every column (wider than 100 columns); bench.json and bench.csv always "
                  "have them all");
  auto* config = app.add_subcommand(
      "config", "Print the effective config as TOML: every key, --set applied, defaults filled in");
  add_config_args(*config, config_args);
  std::string inspect_path;
  auto* inspect = app.add_subcommand("inspect", "List the tensors and metadata of a checkpoint");
  inspect->add_option("file", inspect_path,
                      "A .safetensors checkpoint, or a checkpoint directory or its `latest` "
                      "pointer (the latest checkpoint)")
      ->required();
  std::string consolidate_in, consolidate_out;
  bool consolidate_no_optimizer = false, consolidate_overwrite = false;
  auto* consolidate = app.add_subcommand(
      "consolidate", "Write one safetensors file from a sharded checkpoint");
  consolidate->add_option("checkpoint", consolidate_in,
                          "A sharded checkpoint (its step_<N> directory or its manifest.json), or "
                          "a checkpoint directory or its `latest` pointer (the latest checkpoint)")
      ->required();
  consolidate->add_option("out", consolidate_out, "The .safetensors file to write")->required();
  consolidate->add_flag("--no-optimizer", consolidate_no_optimizer,
                        "Only the parameters (no optimizer.<param>.<state> tensors)");
  consolidate->add_flag("--overwrite", consolidate_overwrite,
                        "Replace `out` when it exists (never a file of a checkpoint)");

  const CLI::App* const commands[] = {train, plan, bench, config, inspect, consolidate};
  // An unknown first word is named, a command or an option before one (CLI11 would only say
  // that a subcommand is required).
  const auto is_command = [&](const char* word) {
    return std::any_of(std::begin(commands), std::end(commands),
                       [&](const CLI::App* sub) { return sub->get_name() == word; });
  };
  // Every rank of a launch parses the same line before MPI starts: one says what it finds (the
  // launcher's rank 0, or a process started alone), as after MPI_Init.
  const bool speaks = launcher_rank() <= 0;
  const bool option = argc > 1 && argv[1][0] == '-';
  if (argc > 1 && (option ? app.get_option_no_throw(argv[1]) == nullptr : !is_command(argv[1]))) {
    if (speaks) {
      std::fprintf(stderr,
                   "zerolap: error: unknown %s '%s' (the commands: train, plan, bench, config, "
                   "inspect, consolidate; see zerolap --help)\n",
                   option ? "option" : "command", argv[1]);
    }
    return kExitBadInput;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help, --help-all, --version: CLI11's "errors" that exit with success.
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) {
      return speaks ? app.exit(e) : 0;
    }
    std::string command = "zerolap";
    for (const CLI::App* sub : commands) {
      if (sub->parsed()) command += " " + sub->get_name();
    }
    if (speaks) {
      std::fprintf(stderr, "zerolap: error: %s (see %s --help)\n", e.what(), command.c_str());
    }
    return kExitBadInput;
  }

  // `config` reads files only: it answers scripts (scripts/supervise.sh) without starting MPI.
  if (*config) return run_config_command(config_args);

  // MPI_Init waits for every rank with no deadline of its own: the start-up watchdog gives it
  // runtime.timeout_s, read from the config before MPI starts.
  const ConfigArgs* run_args = *train ? &train_args : *plan ? &plan_args
                             : *bench ? &bench_args : nullptr;
  MpiSession session(&argc, &argv, startup_timeout_s(run_args));
  const World& world = session.world();
  const auto run_command = [&] {
    if (*train) return run_train_command(train_args, world);
    if (*plan) return run_plan_command(plan_args, plan_world, world, plan_options);
    if (*bench) {
      return run_bench_command(bench_args, world,
                               bench_wide ? TableWidth::Wide : TableWidth::Narrow);
    }
    if (*inspect) return run_inspect_command(inspect_path, world);
    if (*consolidate) {
      return run_consolidate_command(
          consolidate_in, consolidate_out,
          consolidate_no_optimizer ? ConsolidateState::Omit : ConsolidateState::Include,
          consolidate_overwrite ? ExistingOutput::Replace : ExistingOutput::Refuse, world);
    }
    return kExitBadInput;
  };
  try {
    const int code = run_command();
    // What the command printed last is still buffered: a report that cannot be written fails
    // it here (base/standard_output.h), where the flush at exit would drop the error.
    if (code == 0) flush_standard_output();
    return code;
  } catch (const ReportedUserError&) {
    return kExitBadInput;  // every rank agreed; the message is out; MPI finalises cleanly
  } catch (const UserError& e) {
    abort_job(world, kExitBadInput, e.what());
  } catch (const std::system_error& e) {
    // fmt::print's failed write (a report longer than stdio's buffer): stdout's error flag says
    // the stream was stdout, named as flush_standard_output names it.
    abort_job(world, kExitRuntimeFailure,
              std::ferror(stdout) != 0
                  ? fmt::format("cannot write to standard output: {}", e.code().message())
                  : std::string(e.what()));
  } catch (const std::exception& e) {
    abort_job(world, kExitRuntimeFailure, e.what());
  }
}

}  // namespace zl
