// CpuTeamGovernor: with runtime.threads = "auto", shrinks the CPU kernels' OpenMP team between
// training steps while other processes hold this rank's CPUs, and grows it back when they free
// them (Note [Adaptive CPU team] in cpu_team_governor.cpp; docs/guide.md).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"

namespace zl {

// What the governor reads, as running totals: seconds of wall time, the seconds the CPUs of the
// rank's affinity mask were busy (every process), and this process's own CPU seconds.
struct CpuSample {
  double wall_s = 0.0;
  double busy_s = 0.0;
  double own_s = 0.0;
};

// The team for the next interval: `available` CPUs (the mask's `cpus` less what other processes
// used) rounded to the nearest whole CPU, in [1, full]; down at once; up at once when nothing
// else ran on the mask (less than half a CPU), else one thread per interval.
int next_team_size(int current, int full, int cpus, double available_cpus);

// Busy seconds (user, nice, system, irq, softirq, steal) summed over the CPUs in `cpus` from the
// text of /proc/stat; nullopt when a CPU of the list has no line or the text is not /proc/stat's.
std::optional<double> busy_seconds(const std::string& proc_stat, const std::vector<int>& cpus,
                                   double ticks_per_s);

struct GovernorOptions {
  int full = 1;              // runtime.threads resolved: the team it never exceeds
  int cpus = 1;              // the CPUs of the rank's affinity mask, which `sample` measures
  bool adaptive = false;     // runtime.threads = "auto", a CPU run, no user wait variables
  double interval_s = 0.1;   // the least wall time between two decisions
  // The least wall time before the first: two ticks of /proc/stat (100 per second), enough to
  // tell a CPU other processes hold from a free one, so an idle machine gets its whole team
  // within a run's first steps instead of after a full interval on one thread.
  double first_interval_s = 0.02;
  // nullopt: nothing to measure (no /proc/stat): the team stays full. Default: this process.
  std::function<std::optional<CpuSample>()> sample;
};

// Main thread. Sets the process's team limit (kernels/cpu_team.h) and clears it when destroyed.
class CpuTeamGovernor {
 public:
  explicit CpuTeamGovernor(GovernorOptions options);
  ~CpuTeamGovernor();
  CpuTeamGovernor(const CpuTeamGovernor&) = delete;
  CpuTeamGovernor& operator=(const CpuTeamGovernor&) = delete;

  // After every step: one clock read, and a decision once per interval.
  void after_step();
  int team() const { return team_; }

 private:
  GovernorOptions options_;
  int team_ = 1;
  std::optional<CpuSample> last_;
  bool decided_ = false;  // the first decision was taken: interval_s from now on
  Clock::time_point last_time_;
};

// The options for a training run: options.adaptive from the config's runtime.threads (requested,
// kAutoThreads for "auto"), the device, and the environment.
GovernorOptions training_governor_options(int requested_threads, int resolved_threads,
                                          bool cpu_device);

}  // namespace zl
