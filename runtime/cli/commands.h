// The subcommands of the `zerolap` executable. Each runs on every rank of the job with the world
// already initialised, and returns the process exit code; errors are thrown (see
// runtime/cli/cli.cpp for how they become exit codes 1 and 2).
#pragma once

#include <string>
#include <vector>

#include "runtime/bench/bench_report.h"
#include "runtime/checkpoint/files/consolidate.h"
#include "runtime/comm/world.h"

namespace zl {

// The exit codes (base/errors.h): a RuntimeFailure, and a UserError (bad input).
inline constexpr int kExitRuntimeFailure = 1;
inline constexpr int kExitBadInput = 2;

struct ConfigArgs {
  std::string path;
  std::vector<std::string> overrides;  // --set section.key=value
};

int run_train_command(const ConfigArgs& args, const World& world);
// Prints the effective config (to_toml: every key, --set applied, defaults filled in) on stdout;
// runs before MPI starts, on no world. A bad config exits 2 with the reader's message.
int run_config_command(const ConfigArgs& args);
// `zerolap plan` options beyond the config: a link for the scaling tables (they override the
// config's [link]) and a measured compute time for the prediction (runtime/bench/scaling_model.h).
// --link-gbps, --latency-us, --node-ranks and --intra-gbps are kept as given and applied as their
// config twins link.bandwidth_gbps, link.latency_us, link.node_ranks and link.intra_gbps
// (FlagOverride): the same type and range checks.
struct PlanOptions {
  std::string link_gbps;   // empty: the config's link.bandwidth_gbps
  std::string latency_us;  // empty: the config's link.latency_us
  std::string node_ranks;  // empty: the config's link.node_ranks
  std::string intra_gbps;  // empty: the config's link.intra_gbps
  double compute_ms = 0.0;  // 0: no prediction; else finite, in (0, kMaxComputeMs]
};
// world_size > 0 plans for that many ranks instead of the job's.
int run_plan_command(const ConfigArgs& args, int world_size, const World& world,
                     const PlanOptions& options = {});
// Measures every overlap mode x bucket cap of the config's [bench] (runtime/bench/bench.h) and
// prints the tables at `width` (the files keep every column).
int run_bench_command(const ConfigArgs& args, const World& world,
                      TableWidth width = TableWidth::Narrow);
// Lists a checkpoint's tensors, shapes, dtypes and metadata (rank 0); a corrupt file exits 2.
int run_inspect_command(const std::string& path, const World& world);
// Writes one safetensors file from a sharded checkpoint (rank 0); a bad checkpoint exits 2.
int run_consolidate_command(const std::string& checkpoint, const std::string& out,
                            ConsolidateState state, ExistingOutput existing, const World& world);

}  // namespace zl
