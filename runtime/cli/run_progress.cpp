// epochs_done, format_duration, progress_times and report_run_outputs (see run_progress.h).
#include "runtime/cli/run_progress.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "base/standard_output.h"

namespace zl {

double epochs_done(std::int64_t batch_cursor, std::int64_t batches_per_epoch) {
  if (batches_per_epoch <= 0) return 0.0;
  return static_cast<double>(batch_cursor) / static_cast<double>(batches_per_epoch);
}

std::string format_duration(double seconds) {
  if (!(seconds >= 0.0)) seconds = 0.0;
  if (seconds < 60.0) return fmt::format("{:.1f} s", seconds);
  const auto whole = static_cast<std::int64_t>(std::llround(seconds));
  if (whole < 3600) return fmt::format("{}m{:02}s", whole / 60, whole % 60);
  return fmt::format("{}h{:02}m", whole / 3600, (whole % 3600) / 60);
}

std::string progress_times(double elapsed_s, double process_s, std::int64_t first_step,
                           std::int64_t step, std::int64_t total_steps) {
  std::string text = "elapsed " + format_duration(elapsed_s);
  const std::int64_t done = step - first_step;
  if (done > 0 && step < total_steps) {
    const double per_step = process_s / static_cast<double>(done);
    text += "  ETA " + format_duration(per_step * static_cast<double>(total_steps - step));
  }
  return text;
}

void report_run_outputs(const Config& config) {
  const std::filesystem::path dir(config.output.dir);
  std::string line = fmt::format("outputs: {}, {}", (dir / "metrics.csv").string(),
                                 (dir / "config.toml").string());
  if (config.output.trace) line += ", " + (dir / "trace.json").string();
  if (!config.checkpoint.dir.empty()) {
    const std::filesystem::path ck(config.checkpoint.dir);
    std::ifstream latest(ck / "latest");  // written with every checkpoint (checkpoint_files.h)
    std::string name;
    if (latest && std::getline(latest, name) && !name.empty()) {
      line += fmt::format("; checkpoint {} (latest)", (ck / name).string());
    }
  }
  fmt::print("{}\n", line);
  flush_standard_output();
}

}  // namespace zl
