// `zerolap train CONFIG`: trains the configured model on every rank of the job; with
// output.trace = true it also writes output.dir/trace.json (runtime/trace/trace_writer.h).
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>

#include "base/checked_write.h"
#include "base/fault_stop.h"
#include "base/writable_dir.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/directory_lock.h"
#include "runtime/checkpoint/run_outputs.h"
#include "runtime/cli/commands.h"
#include "runtime/cli/gemm_check.h"
#include "runtime/cli/interrupt.h"
#include "runtime/cli/run_progress.h"
#include "runtime/cli/training_run.h"
#include "runtime/config/config.h"
#include "runtime/config/global_batch.h"
#include "runtime/comm/link/simulated_link.h"
#include "runtime/trace/metrics.h"
#include "runtime/trace/trace_writer.h"
#include "runtime/train/run/trainer.h"

namespace zl {

int run_train_command(const ConfigArgs& args, const World& world) {
  fault_stop_point("startup", world.rank);
  Config config;
  RunOutputsClaim claim;  // rank 0: the ownership rule's decision, applied once the checks pass
  std::vector<DirectoryLock> locks;  // rank 0: held until the command ends (directory_lock.h)
  agree_on_user_errors(
      world,
      [&] {
        config = load_config(args.path, args.overrides);
        apply_global_batch(config, world.size);  // the split for this world (global_batch.h)
        if (world.is_root()) {  // rank 0 writes the outputs; found now, not at the first write
          require_writable_dir(config.output.dir, "output.dir");
          if (!config.checkpoint.dir.empty()) {
            require_writable_dir(config.checkpoint.dir, "checkpoint.dir");
          }
          locks = lock_run_directories(config);  // a live run's directory: exit 2
          claim = check_run_outputs(config, world.size);  // another run's dir: exit 2
        }
      },
      config.runtime.timeout_s);
  warn_if_cpu_gemm_falls_short(world, config, GemmUse::Training);
  std::unique_ptr<Trainer> trainer;
  agree_on_user_errors(
      world, [&] { trainer = std::make_unique<Trainer>(config, world); },
      config.runtime.timeout_s);
  const int code = run_or_abort(world, [&] {
    prepare_checkpoints(trainer->state());  // creates checkpoint.dir; resumes when configured
    // Every start-up check passed, the checkpoint loaded: only now the run takes its directories
    // (run_outputs.h), so a run refused on the way leaves them as it found them.
    agree_on_user_errors(
        world,
        [&] {
          if (!world.is_root()) return;
          claim_run_outputs(config, claim, trainer->options().quiet);
          // output.dir/config.toml, the effective config (RuntimeFailure, exit 1, when the write
          // fails).
          ensure_output_dir(config.output.dir);
          write_whole_file((std::filesystem::path(config.output.dir) / "config.toml").string(),
                           to_toml(config), "the effective config");
          apply_checkpoint_removals(config, claim, trainer->options().quiet);
        },
        config.runtime.timeout_s);
    // Ctrl-C: stop at a step and save (interrupt.h); a step is short, so no first note. The
    // handlers stay while the trace is written, so a signal then lets the trace finish.
    InterruptHandlers interrupts(nullptr, "without a checkpoint");
    int signal = 0;
    try {
      signal = run_training(*trainer, interrupts);
    } catch (const NonfiniteStop& e) {
      // Every rank found the same step non-finite at the same point (docs/design.md,
      // "Divergence"): one message, exit 1, a clean finalize, and no checkpoint of that state.
      if (world.is_root()) {
        fmt::print(stderr, "zerolap: error: {}\n", e.what());
        std::fflush(stderr);
      }
      return kExitRuntimeFailure;
    }
    if (config.output.trace) {
      // Every rank stopped after the same step, an interrupted run's too: its trace is written.
      interrupts.set_notes("writing trace.json first", "without trace.json");
      trainer->synchronize();
      fault_stop_point("trace", world.rank);
      write_trace(world, trainer->tracer(), trainer->tracer().take_events(),
                  (std::filesystem::path(config.output.dir) / "trace.json").string(),
                  config.runtime.timeout_s,
                  {{"command", "train"}, {"link", link_label(config.link)}});
    }
    if (signal != 0) return interrupt_exit_code(signal);
    if (world.is_root() && !trainer->options().quiet) report_run_outputs(config);
    return 0;
  });
  trainer.reset();
  return code;
}

}  // namespace zl
