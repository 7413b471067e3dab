// The adaptive CPU team (Note [Adaptive CPU team], runtime/cli/cpu_team_governor.h): the team
// each measured load gives, the /proc/stat parser, the governor's steps with a scripted sampler,
// when it adapts at all, and that a GEMM on a smaller team gives the full team's bits.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu_team.h"
#include "base/exec_context.h"
#include "kernels/gemm.h"
#include "runtime/comm/comm_options.h"
#include "runtime/cli/cpu_team_governor.h"

using namespace zl;

TEST_CASE("the team follows the free CPUs: down at once, up at once only on an idle mask",
          "[cpu_team]") {
  CHECK(next_team_size(4, 4, 4, 4.0) == 4);      // idle
  CHECK(next_team_size(4, 4, 4, 1.2) == 1);      // three CPUs taken: straight down
  CHECK(next_team_size(1, 4, 4, 3.8) == 4);      // nothing else runs: the whole team at once
  CHECK(next_team_size(1, 4, 4, 3.4) == 2);      // another process still there: one more
  CHECK(next_team_size(2, 4, 4, 2.6) == 3);      // rounded to the nearest CPU
  CHECK(next_team_size(2, 4, 4, 2.4) == 2);
  CHECK(next_team_size(3, 4, 4, 0.0) == 1);      // never below one
  CHECK(next_team_size(2, 2, 8, 5.0) == 2);      // never above the full team (a shared mask)
  CHECK(next_team_size(1, 4, 8, 5.0) == 2);      // the mask's other ranks count as load
  CHECK(next_team_size(2, 4, 4, std::nan("")) == 3);  // nothing measured: towards the full team
}

TEST_CASE("busy seconds of the listed CPUs from /proc/stat", "[cpu_team]") {
  const std::string stat =
      "cpu  900 0 300 5000 10 0 0 0 0 0\n"
      "cpu0 100 10 50 2000 5 3 2 5 0 0\n"   // busy: 100+10+50+3+2+5 = 170 ticks
      "cpu1 400 0 100 1000 5 0 0 0 0 0\n"   // 500
      "cpu2 1 0 1 9 0 0 0\n"                // no steal column (old kernels): 2
      "intr 12345\nctxt 999\n";
  CHECK(*busy_seconds(stat, {0}, 100.0) == Approx(1.70));
  CHECK(*busy_seconds(stat, {0, 1}, 100.0) == Approx(6.70));
  CHECK(*busy_seconds(stat, {2}, 100.0) == Approx(0.02));
  CHECK_FALSE(busy_seconds(stat, {3}, 100.0));       // a CPU without a line
  CHECK_FALSE(busy_seconds("cpu0 1 2\n", {0}, 100.0));  // not /proc/stat's format
}

TEST_CASE("the governor starts at one thread, grows while CPUs are free, drops under load",
          "[cpu_team]") {
  // 4 CPUs; each scripted interval is 1 s of wall time with `others` CPU-seconds of other
  // processes' work on them (own time is subtracted from busy time, so it cancels).
  std::vector<double> others = {1, 1, 1, 0, 0, 3, 3, 0, 0};
  std::size_t next = 0;
  CpuSample total;
  GovernorOptions options;
  options.full = 4;
  options.cpus = 4;
  options.adaptive = true;
  options.interval_s = 0.0;  // decide after every step
  options.first_interval_s = 0.0;
  options.sample = [&]() -> std::optional<CpuSample> {
    if (next > 0) {
      total.wall_s += 1.0;
      total.own_s += 0.5;
      total.busy_s += 0.5 + others[next - 1];
    }
    ++next;
    return total;
  };
  {
    CpuTeamGovernor governor(options);
    CHECK(governor.team() == 1);
    CHECK(cpu_team_limit() == 1);
    std::vector<int> teams;
    for (std::size_t i = 0; i < others.size(); ++i) {
      governor.after_step();
      teams.push_back(governor.team());
      CHECK(cpu_team_limit() == governor.team());
    }
    // One CPU taken: up one per interval to 3; idle: all 4; three taken: 1; idle: all 4 again.
    CHECK(teams == std::vector<int>{2, 3, 3, 4, 4, 1, 1, 4, 4});
  }
  CHECK(cpu_team_limit() == 0);  // the governor's end lifts the limit
}

TEST_CASE("the governor's first decision comes after first_interval_s, the next after "
          "interval_s", "[cpu_team]") {
  // 2 CPUs, nothing else running: the first decision gives the whole team at once.
  CpuSample total;
  GovernorOptions options;
  options.full = 2;
  options.cpus = 2;
  options.adaptive = true;
  options.first_interval_s = 0.0;
  options.interval_s = 1e6;  // no second decision within this test
  int samples = 0;
  options.sample = [&]() -> std::optional<CpuSample> {
    ++samples;
    total.wall_s += 1.0;
    total.own_s += 1.0;
    total.busy_s += 1.0;  // only this process
    return total;
  };
  CpuTeamGovernor governor(options);
  CHECK(governor.team() == 1);
  governor.after_step();
  CHECK(governor.team() == 2);
  CHECK(samples == 2);
  governor.after_step();  // within interval_s: not sampled, the team kept
  CHECK(samples == 2);
  CHECK(governor.team() == 2);
}

TEST_CASE("the governor adapts only runtime.threads = auto on the CPU, without the user's wait "
          "variables", "[cpu_team]") {
  unsetenv("OMP_WAIT_POLICY");
  unsetenv("GOMP_SPINCOUNT");
  CHECK(training_governor_options(kAutoThreads, 2, /*cpu_device=*/true).adaptive);
  CHECK_FALSE(training_governor_options(2, 2, true).adaptive);             // explicit: as given
  CHECK_FALSE(training_governor_options(kAutoThreads, 1, true).adaptive);  // nothing to shrink
  CHECK_FALSE(training_governor_options(kAutoThreads, 2, false).adaptive); // CUDA
  setenv("GOMP_SPINCOUNT", "1000", 1);
  CHECK_FALSE(training_governor_options(kAutoThreads, 2, true).adaptive);
  unsetenv("GOMP_SPINCOUNT");
  setenv("OMP_WAIT_POLICY", "passive", 1);
  CHECK_FALSE(training_governor_options(kAutoThreads, 2, true).adaptive);
  unsetenv("OMP_WAIT_POLICY");
  // An explicit count keeps its team: no limit is set.
  {
    CpuTeamGovernor governor(training_governor_options(3, 3, true));
    governor.after_step();
    CHECK(governor.team() == 3);
    CHECK(cpu_team_limit() == 0);
  }
}

TEST_CASE("a GEMM on a smaller team gives the full team's bits", "[cpu_team][gemm]") {
  // Shapes of a training step (forward, the two backward products) and odd ones, with beta = 1
  // (accumulation reads C); each run at 2 threads, then on a team of 1 twice (the first call
  // checks the shape, the second runs on the team the check allowed).
  const ExecContext ctx;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  struct Shape { Transpose ta, tb; std::int64_t m, n, k; float beta; };
  const std::vector<Shape> shapes = {{Transpose::No, Transpose::Yes, 64, 256, 784, 0.0f},
                                     {Transpose::No, Transpose::No, 64, 784, 256, 0.0f},
                                     {Transpose::Yes, Transpose::No, 256, 784, 64, 1.0f},
                                     {Transpose::No, Transpose::No, 3, 5000, 7, 1.0f}};
  set_cpu_gemm_threads(2);
  for (const Shape& s : shapes) {
    const std::int64_t lda = s.ta == Transpose::Yes ? s.m : s.k;
    const std::int64_t ldb = s.tb == Transpose::Yes ? s.k : s.n;
    std::vector<float> a(static_cast<std::size_t>(s.m * s.k));
    std::vector<float> b(static_cast<std::size_t>(s.k * s.n));
    std::vector<float> c0(static_cast<std::size_t>(s.m * s.n));
    for (float& x : a) x = u(rng);
    for (float& x : b) x = u(rng);
    for (float& x : c0) x = u(rng);
    std::vector<std::vector<float>> out(3, c0);
    for (std::size_t run = 0; run < out.size(); ++run) {
      set_cpu_team_limit(run == 0 ? 0 : 1);
      gemm(ctx, s.ta, s.tb, s.m, s.n, s.k, 1.0f, a.data(), lda, b.data(), ldb, s.beta,
           out[run].data(), s.n);
    }
    set_cpu_team_limit(0);
    INFO("m " << s.m << " n " << s.n << " k " << s.k);
    CHECK(std::memcmp(out[0].data(), out[1].data(), out[0].size() * sizeof(float)) == 0);
    CHECK(std::memcmp(out[0].data(), out[2].data(), out[0].size() * sizeof(float)) == 0);
  }
  set_cpu_gemm_threads(1);
}
