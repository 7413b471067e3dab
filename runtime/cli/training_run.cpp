// run_training: logging, evaluation and checkpoint cadence of a run (see training_run.h).
#include "runtime/cli/training_run.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#include <fmt/format.h>

#include "base/clock.h"
#include "base/standard_output.h"
#include "runtime/checkpoint/files/checkpoint_files.h"
#include "runtime/checkpoint/checkpoint_saver.h"
#include "runtime/cli/interrupt.h"
#include "runtime/cli/run_progress.h"
#include "runtime/comm/link/simulated_link.h"
#include "runtime/trace/metrics.h"
#include "runtime/cli/cpu_team_governor.h"
#include "runtime/cli/skip_bound.h"
#include "runtime/train/step/step_verdict.h"

namespace zl {
namespace {

// The step of the checkpoint `latest` names in `dir`, -1 for none (rank 0 reads it; collective).
std::int64_t latest_step_everywhere(Trainer& trainer, const std::string& dir) {
  const double step = trainer.world().is_root() ? static_cast<double>(latest_step(dir)) : 0.0;
  return static_cast<std::int64_t>(trainer.sum_over_ranks({step})[0]);
}

}  // namespace

int run_training(Trainer& trainer, InterruptHandlers& interrupts) {
  const Config& config = trainer.config();
  const World& world = trainer.world();
  const bool quiet = trainer.options().quiet;
  const std::int64_t total_steps = trainer.total_steps();
  MetricsWriter metrics;
  if (world.is_root() && trainer.options().write_outputs) {
    // Opened here, after a resume has set the step: a resumed run keeps the rows up to its step.
    metrics = MetricsWriter((std::filesystem::path(config.output.dir) / "metrics.csv").string(),
                            trainer.step());
  }
  const auto start = Clock::now();
  const std::int64_t first_step = trainer.step();
  const double elapsed_before = metrics.kept_elapsed_s();  // a resume continues the run's clock
  auto elapsed = [&] { return elapsed_before + seconds_since(start); };
  auto epochs = [&] { return epochs_done(trainer.batch_cursor(), trainer.batches_per_epoch()); };
  ThroughputWindow throughput(Clock::now());
  const bool classification = trainer.task() == TaskKind::Classification;
  const std::int64_t samples_per_step =
      config.data.batch_size * world.size * config.train.grad_accum;
  if (world.is_root() && !quiet) {
    // The split shows whenever it is not plain (global_batch.h): micro-batches or a global batch.
    const bool plain_batch = config.train.grad_accum == 1 && config.data.global_batch_size == 0;
    fmt::print("zerolap: training {} ({} parameters) on {} rank{} ({}), {} steps of {} samples{} "
               "({} steps per epoch), mode {}{}, {}{}\n",
               config.source_path, trainer.model().store().parameter_numel(), world.size,
               world.size == 1 ? "" : "s", device_name(trainer.model().store().device()),
               total_steps, samples_per_step,
               plain_batch ? std::string()
                           : fmt::format(" = {} per rank x {} micro-batch{}{}",
                                         config.data.batch_size, config.train.grad_accum,
                                         config.train.grad_accum == 1 ? "" : "es",
                                         config.data.global_batch_size > 0
                                             ? " (data.global_batch_size)"
                                             : ""),
               trainer.steps_per_epoch(), trainer.mode_plan().name(),
               trainer.mode_plan().replicas > 1
                   ? fmt::format(" ({} groups of {} ranks)", trainer.mode_plan().replicas,
                                 config.parallel.shard_group)
                   : std::string(),
               to_string(config.precision.compute),
               // samples/s below are taken on the modelled network: say so up front
               config.link.enabled() ? "; " + link_label(config.link) : std::string());
    flush_standard_output();  // progress that cannot be written ends the run, exit 1
  }
  auto row_at = [&](std::int64_t step) {
    MetricsRow row;
    row.step = step;
    row.epoch = static_cast<std::int64_t>(epochs());  // whole epochs consumed, as checkpoints say
    return row;
  };
  auto emit = [&](MetricsRow row, const std::string& line) {
    row.elapsed_s = elapsed();
    if (!world.is_root()) return;
    metrics.write(row);
    if (!quiet) {
      fmt::print("{}\n", line);
      flush_standard_output();
    }
  };

  // A resume at or past the run's last step trains nothing: only the final evaluation.
  const bool nothing_to_train = first_step > 0 && first_step >= total_steps;
  if (nothing_to_train && world.is_root() && !quiet) {
    fmt::print("zerolap: the checkpoint resumed is at step {}, at or past the run's last step "
               "({}): nothing to train (raise train.steps or train.epochs to train on)\n",
               first_step, total_steps);
    flush_standard_output();
  }
  StopAgreement stop(world, config.runtime.timeout_s);  // SIGINT / SIGTERM: Note [Stop agreement]
  std::int64_t window_first_step = trainer.step() + 1;
  SkipBound skips(config.train.max_consecutive_skips);
  // "auto" threads: a smaller team while other processes hold the CPUs (Note [Adaptive CPU team]).
  const ExecContext& compute = trainer.compute_context();
  CpuTeamGovernor team(training_governor_options(config.runtime.threads, compute.cpu_threads,
                                                 compute.device == DeviceKind::Cpu));
  // checkpoint.format and checkpoint.async: a background write is committed at a later step's
  // poll() and waited for before every exit below, a divergence's included.
  CheckpointSaver checkpoints(config, world);
  checkpoints.reserve_staging(trainer.state());
  try {
    while (trainer.step() < total_steps) {
      // A non-finite step: NonfiniteStop, or skipped (docs/design.md, "Divergence").
      trainer.train_step();
      if (trainer.step() - first_step == config.output.trace_steps) {
        // The trace keeps output.trace_steps steps (the spans begun so far).
        trainer.tracer().stop_recording_at(trainer.tracer().now_us());
      }
      checkpoints.poll();
      team.after_step();
      skips.after_step(trainer.step(), trainer.skipped_steps());
      const std::int64_t step = trainer.step();
      const bool last = step == total_steps;
      if (step % config.train.log_every == 0 || last) {
        const StepLoss window = trainer.take_loss();  // the window's one read-back on CUDA
        const double seconds = throughput.seconds(Clock::now());
        const auto sums = trainer.sum_over_ranks(
            {window.loss_sum, window.correct, window.samples, trainer.window_check_value()});
        trainer.check_window(sums[0], sums[3], window_first_step, step);
        MetricsRow row = row_at(step);
        // Steps skipped as non-finite are not in the sums (window.steps counts the others).
        // A window whose every step was skipped has no loss: its cells stay empty, not 0.
        const auto counted = static_cast<double>(window.steps);
        if (window.steps > 0) {
          row.train_loss =
              sums[0] / (counted * world.size * static_cast<double>(config.train.grad_accum));
          if (classification) row.train_accuracy = sums[2] > 0 ? sums[1] / sums[2] : 0.0;
        }
        // Every step of the window ran forward and backward on its samples, a skipped one too:
        // the throughput counts them all (the loss above only the counted steps').
        const auto window_samples =
            static_cast<double>((step - window_first_step + 1) * samples_per_step);
        row.samples_per_s = window_samples / std::max(seconds, 1e-9);
        // The schedule follows the optimizer's step count, which a skipped step does not advance.
        const std::int64_t lr_step = std::max<std::int64_t>(trainer.optimizer().step_count(), 1);
        row.lr = scheduled_lr(config.optimizer, lr_step, total_steps);
        if (config.train.clip_grad_norm > 0.0f) row.grad_norm = trainer.last_grad_norm();
        emit(row,
             fmt::format(
                 "step {:>6}/{}  epoch {:.2f}  loss {}{}  lr {:.3g}  {:.0f} samples/s  {}", step,
                 total_steps, epochs(),
                 row.train_loss ? fmt::format("{:.4f}", *row.train_loss)
                                : std::string("- (every step skipped)"),
                 classification && row.train_accuracy
                     ? fmt::format("  acc {:.4f}", *row.train_accuracy)
                     : "",
                 *row.lr, *row.samples_per_s,
                 progress_times(elapsed(), seconds_since(start), first_step, step, total_steps)));
        window_first_step = step + 1;
        throughput.restart(Clock::now());
      }
      if (config.train.eval_every > 0 && step % config.train.eval_every == 0 && !last) {
        const auto eval_start = Clock::now();
        const EvalResult e = trainer.evaluate();
        MetricsRow row = row_at(step);
        row.test_loss = e.loss;
        if (classification) row.test_accuracy = e.accuracy;
        emit(row,
             fmt::format("eval  step {}  test_loss {:.4f}{}", step, e.loss,
                         classification ? fmt::format("  test_accuracy {:.4f}", e.accuracy) : ""));
        throughput.leave_out(eval_start, Clock::now());  // not training throughput
      }
      // Checked per window: the parameters must be finite before they become a checkpoint.
      const auto save_checked = [&] {
        trainer.check_window(0.0, trainer.sum_over_ranks({trainer.window_check_value()})[0],
                             std::min(window_first_step, step), step);
        checkpoints.save(trainer.state());
      };
      // The last step is in a checkpoint even when only skipped steps preceded it, as an
      // interrupted one is below: a rerun with checkpoint.resume = true must find the run
      // finished, not train its last steps again from an older `latest`.
      const bool saves = checkpoint_due(config.checkpoint, step, total_steps) &&
                         (skips.state_changed_since_checkpoint() || last);
      if (saves) {
        const auto save_start = Clock::now();
        save_checked();
        skips.checkpoint_written();
        throughput.leave_out(save_start, Clock::now());  // not training throughput
      }
      if (const int signal = stop.after_step()) {  // every rank, after the same step
        std::string path;
        if (!config.checkpoint.dir.empty()) {
          // The step the run stops at is in a checkpoint, for the resume the message names (a due
          // one that only skipped steps preceded wrote none above).
          if (!saves) save_checked();
          checkpoints.finish();  // the interrupt's checkpoint is complete before the exit
          path = checkpoints.path_of(step);
        }
        report_interrupt(world, signal, step, path);
        return signal;
      }
    }
  } catch (const NonfiniteStop&) {
    // Every rank throws it at the same point (docs/design.md, "Divergence"), so all of them
    // commit the checkpoint still in flight here, of an earlier step that was checked finite
    // before it was saved: `latest` names it, as after a synchronous write, for the resume
    // (docs/reliability.md). Bounded by runtime.timeout_s. Any other failure leaves it
    // uncommitted: it may be one rank's, and the others must not wait for it.
    checkpoints.finish();
    throw;
  }
  if (total_steps == 0 && checkpoint_due(config.checkpoint, 0, 0)) {
    checkpoints.save(trainer.state());  // steps = 0: the initial parameters
  } else if (nothing_to_train && !config.checkpoint.dir.empty() &&
             latest_step_everywhere(trainer, config.checkpoint.dir) < first_step) {
    // Resumed from outside into a checkpoint.dir whose `latest` is older, or none: the state is
    // its checkpoint at the last step, so that a resume from there goes on from it.
    checkpoints.save(trainer.state());
  }
  // Trained to its end: a signal from here on, or one the last step's agreement did not take up
  // (it answers a signal at the next step), lets the final checkpoint and evaluation finish; rank
  // 0 says so at once, as they may take a while.
  interrupts.set_notes(
      world.is_root() ? "the run trained to its end: finishing its final checkpoint and evaluation"
                      : nullptr,
      "without the final checkpoint's commit or evaluation");
  interrupts.say_pending_note();
  checkpoints.finish();  // the final checkpoint is complete before the evaluation and the exit
  const EvalResult e = trainer.evaluate();
  const std::int64_t step = trainer.step();
  MetricsRow row = row_at(step);
  const bool final_finite = std::isfinite(e.loss);
  if (final_finite) row.test_loss = e.loss;  // a non-finite loss leaves its cell empty
  if (classification) row.test_accuracy = e.accuracy;
  // A finished run resumed trains nothing: its final row is in metrics.csv already.
  if (step == first_step && metrics.kept_test_row_at(step)) metrics = MetricsWriter();
  // (seconds): this process's time, which scripts/bench_threads_under_load.sh reads.
  emit(row,
       fmt::format("final step {}  test_loss {:.4f}{}  epoch {:.2f}  ({:.2f} s){}", step, e.loss,
                   classification ? fmt::format("  test_accuracy {:.4f}", e.accuracy) : "",
                   epochs(), seconds_since(start),
                   trainer.skipped_steps() > 0
                       ? fmt::format("  ({} steps skipped as non-finite)", trainer.skipped_steps())
                       : std::string()));
  if (!final_finite) {
    // Every rank has the same all-reduced loss: all throw together (exit 1, as "stop" does).
    throw NonfiniteStop(fmt::format(
        "the final evaluation's test loss is not finite ({}) after step {}: the model diverged{} "
        "(lower optimizer.lr, or set train.clip_grad_norm)",
        e.loss, step,
        trainer.skipped_steps() > 0
            ? fmt::format(" ({} steps were skipped as non-finite)", trainer.skipped_steps())
            : std::string()));
  }
  return 0;
}

}  // namespace zl
