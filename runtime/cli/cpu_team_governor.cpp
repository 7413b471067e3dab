// CpuTeamGovernor and what it reads (see cpu_team_governor.h).
#include "runtime/cli/cpu_team_governor.h"

#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>

#include "kernels/cpu_team.h"
#include "runtime/comm/comm_options.h"

namespace zl {

// Note [Adaptive CPU team]: the CPU GEMMs (oneDNN on GNU OpenMP) and the element-wise kernels run
// on one OpenMP team, and a step runs many short parallel regions. Between regions libgomp's
// threads spin (its default, GOMP_SPINCOUNT 300000), which is the fastest on an idle machine: a
// sleeping (passive) thread takes a wake-up per region, which slows a small model's step. But
// while other processes hold the cores, a spinning thread holds a core that the thread it waits
// for needs, and the step collapses (far slower than one thread); no spin count is both fast
// idle and safe under load (scripts/bench_threads_under_load.sh measures it).
// So zerolap keeps libgomp's spinning wait and sizes the team to the CPUs that are free: every
// interval (0.1 s, checked after a step; the first 0.02 s) it reads how long each CPU of the
// rank's affinity mask was busy (/proc/stat) and how much of that was this process
// (getrusage); the rest is other processes' (other ranks of the job sharing the mask count
// too). The team is the mask's CPUs less theirs, rounded, in [1, runtime.threads resolved]: a
// spinning thread then never competes with a busy process for a core. It starts at one thread
// and drops at once (a collapse costs most); it grows to the whole count at once when nothing
// else ran on the mask, else one thread per interval, so ranks sharing a mask (each the others'
// load) settle instead of all jumping.
// Results never depend on the team: the element-wise kernels give the same bits on any split
// (kernels/cpu_parallel.h), and a GEMM shape runs on a smaller team only where that gives the
// full team's bits (Note [GEMM bits on a smaller team], kernels/gemm.cpp), so ranks need not
// agree on their teams. Only with runtime.threads = "auto": an explicit count is run as given;
// and not when the user set OMP_WAIT_POLICY or GOMP_SPINCOUNT (they chose how threads wait).

int next_team_size(int current, int full, int cpus, double available_cpus) {
  const double rounded = std::isfinite(available_cpus) ? std::round(available_cpus) : full;
  const int want = static_cast<int>(std::clamp<double>(rounded, 1.0, full));
  if (want < current) return want;
  if (std::isfinite(available_cpus) && available_cpus > cpus - 0.5) return want;  // idle mask
  return std::min(want, current + 1);
}

std::optional<double> busy_seconds(const std::string& proc_stat, const std::vector<int>& cpus,
                                   double ticks_per_s) {
  std::map<int, double> busy;  // cpu -> ticks
  std::istringstream lines(proc_stat);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("cpu", 0) != 0 || line.size() < 4 || line[3] < '0' || line[3] > '9') continue;
    std::istringstream fields(line.substr(3));
    int cpu = -1;
    double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
    fields >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq;
    if (!fields) return std::nullopt;
    fields >> steal;  // absent on old kernels
    busy[cpu] = user + nice + system + irq + softirq + (fields ? steal : 0.0);
  }
  double total = 0.0;
  for (const int cpu : cpus) {
    const auto it = busy.find(cpu);
    if (it == busy.end()) return std::nullopt;
    total += it->second;
  }
  return total / ticks_per_s;
}

namespace {

// Whether the user set OMP_WAIT_POLICY or GOMP_SPINCOUNT: then they manage how OpenMP threads
// wait, and zerolap keeps the team at runtime.threads.
bool user_sets_openmp_wait() {
  return std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr;
}

std::vector<int> affinity_cpus() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(mask), &mask) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &mask)) cpus.push_back(cpu);
  }
  return cpus;
}

// This process on this machine: /proc/stat (a kernel file, never a user's path) and getrusage.
std::function<std::optional<CpuSample>()> process_sampler(const std::vector<int>& cpus) {
  const long ticks = sysconf(_SC_CLK_TCK);
  const Clock::time_point origin = Clock::now();
  return [ticks, cpus, origin]() -> std::optional<CpuSample> {
    if (ticks <= 0 || cpus.empty()) return std::nullopt;
    std::ifstream file("/proc/stat");
    const std::string text((std::istreambuf_iterator<char>(file)),
                           std::istreambuf_iterator<char>());
    const auto busy = busy_seconds(text, cpus, static_cast<double>(ticks));
    rusage usage{};
    if (!busy || getrusage(RUSAGE_SELF, &usage) != 0) return std::nullopt;
    const auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec * 1e-6; };
    return CpuSample{seconds_since(origin), *busy,
                     seconds(usage.ru_utime) + seconds(usage.ru_stime)};
  };
}

}  // namespace

GovernorOptions training_governor_options(int requested_threads, int resolved_threads,
                                          bool cpu_device) {
  GovernorOptions o;
  o.full = std::max(resolved_threads, 1);
  o.adaptive = requested_threads == kAutoThreads && o.full > 1 && cpu_device &&
               !user_sets_openmp_wait();
  if (!o.adaptive) return o;
  const std::vector<int> cpus = affinity_cpus();
  o.cpus = static_cast<int>(cpus.size());
  o.sample = process_sampler(cpus);
  return o;
}

CpuTeamGovernor::CpuTeamGovernor(GovernorOptions options)
    : options_(std::move(options)), team_(options_.full), last_time_(Clock::now()) {
  if (!options_.adaptive || !options_.sample) return;
  last_ = options_.sample();
  if (!last_) return;
  team_ = 1;  // until the first interval shows free CPUs: a spinning team never starts on busy ones
  set_cpu_team_limit(team_);
}

CpuTeamGovernor::~CpuTeamGovernor() {
  if (options_.adaptive) set_cpu_team_limit(0);
}

void CpuTeamGovernor::after_step() {
  if (!last_) return;  // not adaptive, or nothing to measure
  const Clock::time_point now = Clock::now();
  const double interval = decided_ ? options_.interval_s : options_.first_interval_s;
  if (std::chrono::duration<double>(now - last_time_).count() < interval) return;
  const std::optional<CpuSample> sample = options_.sample();
  if (!sample || sample->wall_s <= last_->wall_s) return;
  const double wall = sample->wall_s - last_->wall_s;
  const double own = sample->own_s - last_->own_s;
  const double others = std::max(0.0, (sample->busy_s - last_->busy_s) - own);
  const auto cpus = static_cast<double>(options_.cpus);
  team_ = next_team_size(team_, options_.full, options_.cpus, cpus - others / wall);
  set_cpu_team_limit(team_);
  last_ = sample;
  last_time_ = now;
  decided_ = true;
}

}  // namespace zl
