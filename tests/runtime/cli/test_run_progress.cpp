// The time and throughput figures of the progress lines and metrics.csv (run_progress.h).
#include <chrono>

#include <catch2/catch.hpp>

#include "runtime/cli/run_progress.h"

using namespace std::chrono_literals;

TEST_CASE("a log window's time leaves out its evaluations and checkpoints, not its steps",
          "[progress]") {
  const zl::Clock::time_point t0{};
  zl::ThroughputWindow window(t0);
  // Steps for 20 ms, an evaluation for 1 s, steps for 10 ms more: 30 ms of training, so a
  // window's samples over it are the training throughput (the steps before the pause count).
  window.leave_out(t0 + 20ms, t0 + 1020ms);
  CHECK(window.seconds(t0 + 1030ms) == Approx(0.030));
  window.leave_out(t0 + 1030ms, t0 + 1530ms);  // a checkpoint write
  CHECK(window.seconds(t0 + 1540ms) == Approx(0.040));
  // The next window starts from nothing left out.
  window.restart(t0 + 1540ms);
  CHECK(window.seconds(t0 + 1550ms) == Approx(0.010));
}

TEST_CASE("durations for a person and the ETA", "[progress]") {
  CHECK(zl::format_duration(8.44) == "8.4 s");
  CHECK(zl::format_duration(187) == "3m07s");
  CHECK(zl::format_duration(7500) == "2h05m");
  CHECK(zl::progress_times(10.0, 4.0, 0, 40, 100) == "elapsed 10.0 s  ETA 6.0 s");
  CHECK(zl::progress_times(10.0, 4.0, 40, 40, 100) == "elapsed 10.0 s");  // no step run yet
  CHECK(zl::progress_times(10.0, 4.0, 0, 100, 100) == "elapsed 10.0 s");  // the last step
}
