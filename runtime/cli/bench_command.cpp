// `zerolap bench CONFIG`: runs every bench mode x bucket cap (runtime/bench/bench.h), prints the
// table on rank 0 and writes bench.json, bench.csv and, with output.trace, trace.json to
// output.dir.
#include <csignal>
#include <cstdio>

#include <fmt/format.h>

#include "base/fault_stop.h"
#include "base/standard_output.h"
#include "base/writable_dir.h"
#include "runtime/bench/bench.h"
#include "runtime/bench/bench_report.h"
#include "runtime/checkpoint/directory_lock.h"
#include "runtime/checkpoint/run_outputs.h"
#include "runtime/cli/commands.h"
#include "runtime/cli/gemm_check.h"
#include "runtime/cli/interrupt.h"
#include "runtime/comm/link/simulated_link.h"
#include "runtime/comm/timed_mpi.h"
#include "runtime/config/config.h"
#include "runtime/config/global_batch.h"
#include "runtime/train/run/startup_facts.h"

namespace zl {
namespace {

// A bench stopped by SIGINT / SIGTERM: the rows it finished, on rank 0; no bench.json or
// bench.csv, which would read as a complete run. Returns the exit code, 128 + signal.
int report_stopped_bench(const World& world, const BenchReport& report, TableWidth width) {
  if (world.is_root()) {
    if (!report.rows.empty()) fmt::print("\n{}", format_bench_table(report, width));
    std::fflush(stdout);
    // On stdout after the table, as train's interrupted line: one stream keeps the order.
    fmt::print("{}",
               wrap_lines(fmt::format("zerolap: {}: bench interrupted after {} of {} runs (the "
                                      "table above); bench.json and bench.csv not written",
                                      report.stopped_by == SIGINT ? "SIGINT" : "SIGTERM",
                                      report.finished_runs, report.planned_runs),
                          "  ", width));
    std::fflush(stdout);
  }
  return interrupt_exit_code(report.stopped_by);
}

}  // namespace

int run_bench_command(const ConfigArgs& args, const World& world, TableWidth width) {
  Config config;
  std::vector<DirectoryLock> locks;  // rank 0: held until the command ends (directory_lock.h)
  RunOutputsClaim claim;  // rank 0: taken before the bench's first file (run_outputs.h)
  agree_on_user_errors(world, [&] {
    config = load_config(args.path, args.overrides);
    apply_global_batch(config, world.size);  // the split for this world (global_batch.h)
    // Modelled nodes of whole ranks.
    check_link_world(config.link, world.size, where_set(config, "link.node_ranks"));
    check_bench_shard_groups(config, world.size);  // hsdp<stage>/<overlap>@G: G divides world
    check_bench_memory(config, world);  // before the bench allocates its model and buffers
    if (world.is_root()) {  // not after minutes of measuring
      require_writable_dir(config.output.dir, "output.dir");  // a read-only one: exit 2 now
      locks.emplace_back(config.output.dir, "output.dir");  // a live run's directory: exit 2
      claim = check_bench_outputs(config, world.size);  // another run's dir: exit 2
    }
  }, config.runtime.timeout_s);
  // The bench sizes its limit collectives from the config before any trainer agrees: ranks that
  // run another config must stop here (exit 2, per key and rank), not in a mis-sized collective.
  // Every rank finds the same difference: reported once, and the job ends cleanly, as in train.
  agree_on_user_errors(
      world, [&] { agree_on_facts(world, config_facts(config), config.runtime.timeout_s); },
      config.runtime.timeout_s);
  warn_if_cpu_gemm_falls_short(world, config, GemmUse::Bench);
  // A UserError from here on (a data file another rank could read) ends the job via MPI_Abort.
  // Ctrl-C: stop after the run in progress (interrupt.h), which may take a while: said at once,
  // by rank 0 (mpirun hands the signal to every rank).
  InterruptHandlers interrupts(
      world.is_root() ? "the bench stops after the run in progress (during the last run it "
                        "finishes)"
                      : nullptr,
      "without bench.json or bench.csv");
  BenchOptions options;
  options.width = width;
  options.stop_after_run = [&] { return agree_on_signal(world, config.runtime.timeout_s); };
  bool claimed = false;  // a bench that writes nothing (stopped without a trace) claims nothing
  const auto claim_outputs = [&] {
    if (claimed) return;
    claim_run_outputs(config, claim, /*quiet=*/false);
    claimed = true;
  };
  if (world.is_root()) options.before_first_output = claim_outputs;
  const BenchReport report = run_bench(config, world, options);
  if (report.stopped_by != 0) return report_stopped_bench(world, report, width);
  // Every rank waits here, with the handlers above installed, until rank 0 has written the
  // results: a signal now lets them be written (exit 0). A rank that went on to MPI_Finalize would
  // meet it with the default action and end the job 130 with bench.json whole.
  const auto results_written = [&] {
    timed_barrier(world.comm, WaitLimit{world.rank, config.runtime.timeout_s},
                  "the barrier after the bench's results");
  };
  if (!world.is_root()) {
    results_written();
    return 0;
  }
  interrupts.set_notes("writing bench.json and bench.csv first", "without bench.json or bench.csv");
  fmt::print("\n{}", format_bench_table(report, width));
  claim_outputs();
  write_bench_outputs(report, config.output.dir);
  fmt::print("{}", wrap_lines(fmt::format("wrote {0}/bench.json and {0}/bench.csv{1}",
                                          config.output.dir,
                                          config.output.trace
                                              ? fmt::format(" and {}/trace.json", config.output.dir)
                                              : ""),
                              "  ", width));
  flush_standard_output();
  fault_stop_point("bench_outputs", world.rank);  // tests: a signal after the results are written
  results_written();
  return 0;
}

}  // namespace zl
