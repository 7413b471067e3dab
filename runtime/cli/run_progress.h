// What a training run's progress lines say about time and data (docs/guide.md, "Progress
// lines"): the epochs of data consumed, the elapsed time of the run across resumes, the
// estimated time left, and the files a run wrote.
#pragma once

#include <cstdint>
#include <string>

#include "base/clock.h"
#include "runtime/config/config.h"

namespace zl {

// Epochs of data consumed: the sampler's cursor over its batches per epoch, the convention of
// the checkpoint's metadata and the resume message (epoch 1.42: 42% into the second pass; 3.00
// after three whole passes). Exact after a reshard, where (step - 1) / steps_per_epoch is not.
double epochs_done(std::int64_t batch_cursor, std::int64_t batches_per_epoch);

// A duration for a person: "8.4 s", "3m07s", "2h05m".
std::string format_duration(double seconds);

// "elapsed 3m07s  ETA 41.0 s": `elapsed_s` of the whole run (earlier runs it resumes included);
// the ETA from this process's rate, `process_s` for the steps first_step..step, over the steps
// left to total_steps. No ETA before a step has run in this process.
std::string progress_times(double elapsed_s, double process_s, std::int64_t first_step,
                           std::int64_t step, std::int64_t total_steps);

// The training time of one log window, which its samples are divided by for samples/s:
// evaluations and checkpoint writes inside the window are left out, and the steps before them
// stay in (the window's samples include those steps).
class ThroughputWindow {
 public:
  explicit ThroughputWindow(Clock::time_point now) : start_(now) {}
  void restart(Clock::time_point now) {
    start_ = now;
    left_out_ = {};
  }
  void leave_out(Clock::time_point from, Clock::time_point to) { left_out_ += to - from; }
  double seconds(Clock::time_point now) const {
    return std::chrono::duration<double>(now - start_ - left_out_).count();
  }

 private:
  Clock::time_point start_;
  Clock::duration left_out_{};
};

// The last line of `zerolap train` on rank 0, naming where the run's files went, for example
//   outputs: DIR/metrics.csv, DIR/config.toml[, DIR/trace.json];
//   checkpoint CKDIR/step_N.safetensors (latest)
// on one line.
void report_run_outputs(const Config& config);

}  // namespace zl
