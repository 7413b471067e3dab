// run_bench: the timed runs of every (precision, bucket cap, mode), their compute-only twins, and
// the derived figures (see bench.h, Note [Bench timing] and Note [Ideal step]).
#include "runtime/bench/bench.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <utility>

#include <malloc.h>

#include <fmt/format.h>

#include "base/errors.h"
#include "runtime/bench/bench_report.h"
#include "runtime/train/plan/bucket_plan.h"
#include "runtime/train/plan/shard_layout.h"
#include "base/clock.h"
#include "runtime/comm/backends/device.h"
#include "runtime/comm/compute_only_communicator.h"
#include "runtime/comm/link/simulated_link.h"
#include "runtime/comm/thread_priority.h"
#include "runtime/bench/scaling_model.h"
#include "runtime/comm/timed_mpi.h"
#include "runtime/trace/timeline_summary.h"
#include "runtime/trace/trace_writer.h"
#include "runtime/bench/step_stats.h"
#include "runtime/bench/timing_collectives.h"
#include "runtime/train/plan/collective_program.h"
#include "runtime/train/plan/memory_estimate.h"
#include "runtime/train/plan/plan_report.h"
#include "runtime/train/run/trainer.h"

namespace zl {
namespace {

std::vector<std::int64_t> gather_to_all(const World& world, const WaitLimit& limit,
                                        std::int64_t value) {
  std::vector<std::int64_t> out(static_cast<std::size_t>(world.size), 0);
  timed_allgather(&value, 1, MPI_INT64_T, out.data(), 1, MPI_INT64_T, world.comm, limit,
                  "the bench's gather of per-rank figures");
  return out;
}

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const double pos = p * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (values[hi] - values[lo]) * (pos - static_cast<double>(lo));
}

// The precisions of bench.precision (precision.compute when empty), each a whole [precision]: a
// bf16 entry takes reduce_dtype and master_weights from the config, fp32 and tf32 use fp32 for
// both (the config refuses bf16 wire or remainders without bf16 compute).
std::vector<PrecisionConfig> bench_precisions(const Config& config) {
  if (config.bench.precision.empty()) return {config.precision};
  std::vector<PrecisionConfig> out;
  for (ComputePrecision compute : config.bench.precision) {
    PrecisionConfig p;
    p.compute = compute;
    if (compute == ComputePrecision::Bf16) {
      p.reduce_dtype = config.precision.reduce_dtype;
      p.master_weights = config.precision.master_weights;
    }
    out.push_back(p);
  }
  return out;
}

// `config` computing in `precision`: [precision] and the model's storage type.
Config with_precision(Config config, const PrecisionConfig& precision) {
  config.precision = precision;
  config.model.dtype = precision.compute == ComputePrecision::Bf16 ? DType::BF16 : DType::F32;
  return config;
}

// The config of one run: the precision, mode and cap overridden, exactly warmup + steps steps, no
// checkpoints; the compute-only twin runs without the link model and untraced.
Config run_config(const Config& base, const PrecisionConfig& precision, const Mode& mode,
                  double cap_mb, bool compute_only) {
  Config c = with_precision(base, precision);
  set_mode(c.parallel, mode);
  c.parallel.bucket_cap_mb = cap_mb;
  c.train.steps = base.bench.warmup + base.bench.steps;
  c.train.epochs = 0;
  c.train.eval_every = 0;
  c.checkpoint = CheckpointConfig{};
  // A check of this run's keys names the [bench] key that set them (where_set).
  for (const char* key : {"parallel.mode", "parallel.overlap", "parallel.collective",
                          "parallel.zero_stage", "parallel.shard_group"}) {
    c.key_locations[key] = where_set(base, "bench.modes");
  }
  c.key_locations["parallel.bucket_cap_mb"] = where_set(base, "bench.bucket_cap_mb");
  c.key_locations["train.steps"] = where_set(base, "bench.steps");
  if (compute_only) {
    // No link model; link.ranks stays, so an element-shard row's twin steps the same shard.
    c.link = LinkConfig{};
    c.link.ranks = base.link.ranks;
    c.output.trace = false;
  }
  return c;
}

// Resident-memory high-water mark of this process (VmHWM) in bytes, and its reset (false where
// the kernel refuses /proc/self/clear_refs).
std::int64_t peak_rss_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;  // "... kB"
  }
  return 0;
}

bool reset_peak_rss() {
#if defined(__GLIBC__)
  // What earlier runs freed goes back to the system first: malloc keeps freed heap memory
  // resident, and this run's peak would count it, so a mode's peak depended on the modes before.
  malloc_trim(0);
#endif
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";  // resets the high-water mark to the current RSS (Linux >= 4.0)
  clear.flush();
  return static_cast<bool>(clear);
}

// What one timed run measured on this rank (times are totals over the timed steps).
struct RunFigures {
  double total_s = 0.0;
  std::vector<double> step_s;
  double finish_backward_s = 0.0;  // the main thread's time in the mode's schedule
  TimelineSummary timeline;  // the streams' own spans (Note [Exposed communication])
  double comm_busy_s = 0.0;
  std::int64_t wire_bytes = 0, payload_bytes = 0, peak_rss = 0;
  std::array<std::int64_t, 2> tier_wire_bytes{};  // [LinkTier]
  std::array<CommCoverage, 2> tier_coverage{};    // [LinkTier]
  RankMemory allocated;  // parameters, gradients, masters, optimizer state
  DeviceKind device = DeviceKind::Cpu;  // where the trainer ran
};

RunFigures timed_run(const Config& config, const World& world, bool compute_only,
                     const Tracer& bench_clock, std::vector<TraceSource>* trace) {
  const WaitLimit limit{world.rank, config.runtime.timeout_s};
  TrainerOptions options;
  options.quiet = true;
  options.write_outputs = false;
  if (compute_only) {
    options.wrap_comm = [](std::unique_ptr<Communicator> c) -> std::unique_ptr<Communicator> {
      return std::make_unique<ComputeOnlyCommunicator>(std::move(c));
    };
  }
  RunFigures f;
  Trainer trainer(config, world, options);
  StepStatsRecorder recorder(trainer);
  f.device = trainer.model().store().device();
  // A failure ends the job before ~Trainer could wait for a failed peer (run_or_abort).
  run_or_abort(world, [&] {
    for (std::int64_t i = 0; i < config.bench.warmup; ++i) trainer.train_step();
    trainer.synchronize();
    aligned_barrier(world, limit);

    recorder.start();
    const double trace_offset_us = bench_clock.now_us();
    const auto start = Clock::now();
    for (std::int64_t i = 0; i < config.bench.steps; ++i) {
      const auto step_start = Clock::now();
      trainer.train_step();
      f.step_s.push_back(seconds_since(step_start));
    }
    trainer.synchronize();
    aligned_barrier(world, limit);
    f.total_s = seconds_since(start);

    const StepStats stats = recorder.stop();
    f.finish_backward_s = stats.finish_backward_s;
    f.timeline = summarize_timeline(stats.timeline, static_cast<int>(trainer.plan().buckets.size()),
                                    f.total_s);
    // Each communicator's tier is its span's (the link it occupies); comm.world (a hybrid row's
    // step verdict) is flat.
    const CommSpans spans = comm_spans(trainer.mode_plan(), config.link, world.size);
    const LinkTier flat = flat_link_span(config.link, world.size).tier;
    const std::pair<CommRole, const CommStats*> by_role[] = {
        {CommRole::Reduce, &stats.reduce}, {CommRole::Broadcast, &stats.broadcast},
        {CommRole::Replica, &stats.replica}};
    for (const auto& [role, c] : by_role) {
      f.comm_busy_s += c->busy_seconds;
      f.wire_bytes += c->wire_bytes;
      f.payload_bytes += c->payload_bytes;
      f.tier_wire_bytes[static_cast<std::size_t>(spans.of(role).tier)] += c->wire_bytes;
    }
    for (const LinkTier tier : {LinkTier::Inter, LinkTier::Intra}) {
      std::vector<std::string> streams;
      for (const CommRole role : {CommRole::Reduce, CommRole::Broadcast, CommRole::Replica}) {
        if (spans.of(role).tier == tier) streams.emplace_back(comm_role_name(role));
      }
      if (flat == tier) streams.emplace_back("comm.world");
      f.tier_coverage[static_cast<std::size_t>(tier)] =
          comm_coverage(stats.timeline, streams, f.total_s);
    }
    f.allocated = stats.allocated;
    f.peak_rss = peak_rss_bytes();
    if (trace && !stats.trace_events.empty()) {
      trace->push_back({stats.trace_events, trace_offset_us});
    }
  });
  return f;
}

// One round of a row: its timed run and the run's compute-only twin (Note [Bench timing]).
struct Round {
  RunFigures real, alone;
};

// Each figure a row gives in seconds per step: the row's field, and its total over one round's
// timed steps on this rank.
struct SecondsFigure {
  double BenchRow::*field;
  double (*total)(const Round& round);
};
constexpr SecondsFigure kSecondsPerStep[] = {
    {&BenchRow::step_s, [](const Round& r) { return r.real.total_s; }},
    {&BenchRow::forward_s, [](const Round& r) { return r.real.timeline.forward_s; }},
    {&BenchRow::backward_s, [](const Round& r) { return r.real.timeline.backward_s; }},
    {&BenchRow::finish_backward_s, [](const Round& r) { return r.real.finish_backward_s; }},
    {&BenchRow::optimizer_s, [](const Round& r) { return r.real.timeline.optimizer_s; }},
    {&BenchRow::comm_busy_s, [](const Round& r) { return r.real.comm_busy_s; }},
    {&BenchRow::compute_s, [](const Round& r) { return r.alone.total_s; }},
    {&BenchRow::compute_forward_s, [](const Round& r) { return r.alone.timeline.forward_s; }},
    {&BenchRow::compute_backward_s, [](const Round& r) { return r.alone.timeline.backward_s; }},
    {&BenchRow::compute_optimizer_s, [](const Round& r) { return r.alone.timeline.optimizer_s; }},
    {&BenchRow::wait_s, [](const Round& r) { return r.real.timeline.wait_s; }},
    {&BenchRow::reduction_s, [](const Round& r) { return r.real.timeline.reduction_s; }},
    {&BenchRow::broadcast_s, [](const Round& r) { return r.real.timeline.broadcast_s; }},
    {&BenchRow::comm_s, [](const Round& r) { return r.real.timeline.comm_s; }},
    {&BenchRow::hidden_comm_s, [](const Round& r) { return r.real.timeline.hidden_comm_s; }},
    {&BenchRow::exposed_comm_s, [](const Round& r) { return r.real.timeline.exposed_comm_s; }},
    {&BenchRow::idle_s, [](const Round& r) { return r.real.timeline.idle_s; }},
};

// This rank's totals over one round's timed steps that a row divides by its steps, in the order
// set_per_step reads them: kSecondsPerStep's, the bytes sent and their payload, then per tier
// (Inter, Intra) its bytes and the timeline's comm, hidden and exposed.
std::vector<double> round_figures(const Round& round) {
  std::vector<double> f;
  for (const SecondsFigure& s : kSecondsPerStep) f.push_back(s.total(round));
  f.push_back(static_cast<double>(round.real.wire_bytes));
  f.push_back(static_cast<double>(round.real.payload_bytes));
  for (const std::size_t tier : {0u, 1u}) {
    const CommCoverage& c = round.real.tier_coverage[tier];
    f.insert(f.end(), {static_cast<double>(round.real.tier_wire_bytes[tier]), c.comm_s,
                       c.hidden_comm_s, c.exposed_comm_s});
  }
  return f;
}

// The row's figures per step from `totals`: round_figures summed over `steps` timed steps (of all
// rounds) and maxed over ranks.
void set_per_step(BenchRow& row, const std::vector<double>& totals, double steps) {
  auto next = totals.begin();
  const auto per_step = [&] { return *next++ / steps; };
  const auto bytes_per_step = [&] { return static_cast<std::int64_t>(std::llround(per_step())); };
  for (const SecondsFigure& s : kSecondsPerStep) row.*s.field = per_step();
  row.wire_bytes_per_step = bytes_per_step();
  row.payload_bytes_per_step = bytes_per_step();
  for (BenchRow::TierFigures& t : row.tiers) {
    t.wire_bytes_per_step = bytes_per_step();
    t.comm_s = per_step();
    t.hidden_comm_s = per_step();
    t.exposed_comm_s = per_step();
  }
  // round_figures and this function must list the figures alike, or every later one shifts.
  ZL_CHECK(next == totals.end(), "bench: {} figures per round, {} read into a row",
           totals.size(), next - totals.begin());
}

// One row's runs summed over rounds (Note [Bench rounds]).
struct RoundTotals {
  int rounds = 0;
  std::vector<double> figures;  // round_figures, summed
  std::vector<double> bucket_reduction_s, bucket_step_s, bucket_broadcast_s;
  std::vector<double> step_s;  // every round's timed steps, in order
  std::int64_t peak_rss = 0;   // the highest of the rounds
  RankMemory allocated;        // the same in every round

  void add(const Round& round) {
    const RunFigures& real = round.real;
    add_to(figures, round_figures(round));
    add_to(bucket_reduction_s, real.timeline.bucket_reduction_s);
    add_to(bucket_step_s, real.timeline.bucket_step_s);
    add_to(bucket_broadcast_s, real.timeline.bucket_broadcast_s);
    step_s.insert(step_s.end(), real.step_s.begin(), real.step_s.end());
    peak_rss = std::max(peak_rss, real.peak_rss);
    allocated = real.allocated;
    ++rounds;
  }

 private:
  // The first round's figures, then their sums.
  void add_to(std::vector<double>& sum, const std::vector<double>& x) const {
    if (rounds == 0) {
      sum = x;
      return;
    }
    ZL_CHECK(sum.size() == x.size(), "bench rounds: {} figures after {}", x.size(), sum.size());
    for (std::size_t i = 0; i < x.size(); ++i) sum[i] += x[i];
  }
};

// Note [Ideal step] (bench.h), and the scaling model's step (Note [Scaling model]), both from the
// collectives' times the limits measured on each communicator's shape and the row's compute
// time: each tier's collectives and the last bucket's chain across them.
void ideal_step(BenchRow& row, const ModePlan& mode, const BucketPlan& plan, const CommSpans& spans,
                const BenchLimits& limits, const ComputeShares& shares) {
  const ModeComm comm = mode_comm(mode, plan, spans, [&](const ProgramEntry& c, const LinkSpan&) {
    const CommPlace& place = spans.place(c.comm);
    return limits.collective_seconds(collective_name(c.op), c.dtype, c.bytes(), place.members,
                                     place.stride);
  });
  row.comm_model_s = comm.total_s;
  row.nonoverlap_comm_s = comm.last_s;
  for (const std::size_t tier : {0u, 1u}) row.tiers[tier].comm_model_s = comm.tiers[tier].total_s;
  row.ideal_step_s = ideal_step_s(comm, row.compute_s);
  row.vs_ideal = row.ideal_step_s > 0.0 ? row.step_s / row.ideal_step_s : 0.0;
  row.predicted_step_s = predicted_step_s(mode, comm, row.compute_s, shares);
}

// The caps of bench.bucket_cap_mb (parallel.bucket_cap_mb when empty).
std::vector<double> bench_caps(const Config& config) {
  return config.bench.bucket_cap_mb.empty() ? std::vector<double>{config.parallel.bucket_cap_mb}
                                            : config.bench.bucket_cap_mb;
}

// One run of the bench, planned as its trainer plans it.
struct PlannedRun {
  PrecisionConfig precision;
  double cap = 0.0;
  Mode mode;
  ModePlan mode_plan;  // bench_mode_plan
  // The layout and buckets it allocates (element shards pad every bucket: shard_layout.h;
  // link.ranks shrinks the shards).
  PlannedLayout planned;
};

// Every run of the bench, precisions outer, then caps, modes inner: the order of a round's runs
// and of the report's rows.
std::vector<PlannedRun> plan_runs(const Config& config, int world) {
  std::vector<PlannedRun> runs;
  for (const PrecisionConfig& precision : bench_precisions(config)) {
    for (const double cap : bench_caps(config)) {
      for (const Mode& mode : bench_modes(config)) {
        const ModePlan mode_plan = bench_mode_plan(mode, config, precision, world);
        runs.push_back({precision, cap, mode, mode_plan,
                        plan_layout(config.model, config.parallel, mode_plan,
                                    planned_ranks(config, mode_plan, world), cap)});
      }
    }
  }
  return runs;
}

// The row of `run` from its rounds' totals `sum` (Note [Bench rounds]): maxed over ranks, per
// step, beside its plan's memory and its ideal step. Collective.
BenchRow pooled_row(const Config& config, const World& world, const PlannedRun& run,
                    const RoundTotals& sum, const BenchLimits& limits,
                    const ParameterStore& layout) {
  const WaitLimit limit{world.rank, config.runtime.timeout_s};
  const ModePlan& mode_plan = run.mode_plan;
  const BucketPlan& plan = run.planned.plan;
  BenchRow row;
  row.precision = to_string(run.precision.compute);
  row.reduce_dtype = dtype_name(mode_plan.reduce_dtype);
  row.master_weights = to_string(mode_plan.master_weights);
  row.mode = run.mode.name();
  row.bucket_cap_mb = run.cap;
  row.buckets = static_cast<int>(plan.buckets.size());
  row.samples_per_step = config.data.batch_size * config.train.grad_accum * world.size;

  const auto steps = static_cast<double>(config.bench.steps * sum.rounds);
  const auto per_step_max = [&](std::vector<double> totals) {
    max_over_ranks(world, limit, totals);
    for (double& x : totals) x /= steps;
    return totals;
  };
  std::vector<double> maxed = sum.figures;
  max_over_ranks(world, limit, maxed);
  set_per_step(row, maxed, steps);
  row.comm_overhead_s = row.step_s - row.compute_s;
  row.phases_vs_step = row.step_s > 0.0
                           ? (row.forward_s + row.backward_s + row.optimizer_s) / row.step_s
                           : 0.0;
  row.bucket_reduction_s = per_step_max(sum.bucket_reduction_s);
  row.bucket_step_s = per_step_max(sum.bucket_step_s);
  row.bucket_broadcast_s = per_step_max(sum.bucket_broadcast_s);
  row.samples_per_s = static_cast<double>(row.samples_per_step) / row.step_s;

  row.step_times_s = sum.step_s;
  max_over_ranks(world, limit, row.step_times_s);
  row.step_median_s = percentile(row.step_times_s, 0.5);
  row.step_p10_s = percentile(row.step_times_s, 0.1);
  row.step_p90_s = percentile(row.step_times_s, 0.9);

  row.optimizer_state_bytes = gather_to_all(world, limit, sum.allocated.state);
  row.state_bytes = gather_to_all(world, limit, sum.allocated.total());
  row.peak_rss_bytes = gather_to_all(world, limit, sum.peak_rss);
  for (int r = 0; r < world.size; ++r) {
    const RankMemory want = rank_memory(mode_plan, plan, run.planned.layout.total_numel(), r);
    row.planned_optimizer_state_bytes.push_back(want.state);
    row.planned_state_bytes.push_back(want.total());
  }
  ideal_step(row, mode_plan, plan, comm_spans(mode_plan, config.link, world.size), limits,
             compute_shares(layout, plan));
  return row;
}

}  // namespace

ModePlan bench_mode_plan(const Mode& mode, const Config& config,
                         const PrecisionConfig& precision, int world) {
  Config run = with_precision(config, precision);
  set_mode(run.parallel, mode);
  return make_run_mode_plan(run, world);
}

std::vector<Mode> bench_modes(const Config& config) {
  const std::vector<Mode> all = all_modes();
  // Interleaved cannot clip or skip a step: the default list leaves it out then. A listed mode is
  // one of all_modes() and can run the config (config validation, check_bench_modes).
  auto runs = [&](const Mode& m) {
    const ModePlan mode = bench_mode_plan(m, config, config.precision, 1);
    return (mode.can_clip || config.train.clip_grad_norm <= 0.0f) &&
           (mode.schedule != ScheduleKind::ZeroInterleaved ||
            config.train.on_nonfinite == OnNonfinite::Stop);
  };
  if (config.bench.modes.empty()) {
    std::vector<Mode> runnable;
    std::copy_if(all.begin(), all.end(), std::back_inserter(runnable), runs);
    return runnable;
  }
  std::vector<Mode> out;
  for (const std::string& name : config.bench.modes) {
    const std::optional<Mode> mode = parse_mode(name);
    ZL_CHECK(mode, "bench.modes: unknown mode \"{}\" passed config validation", name);
    ZL_CHECK(runs(*mode),
             "bench.modes: \"{}\" cannot run this config but passed config validation", name);
    out.push_back(*mode);
  }
  return out;
}

void check_bench_shard_groups(const Config& config, int world) {
  for (const Mode& m : bench_modes(config)) {
    if (m.shard_group == 0) continue;
    if (world % m.shard_group != 0) {
      throw UserError(fmt::format(
          "{}: bench.modes: \"{}\" shards inside groups of {} consecutive ranks, and {} does not "
          "divide the {} rank{} of this job: list hybrid modes whose @G divides {}",
          where_set(config, "bench.modes"), m.name(), m.shard_group, m.shard_group, world,
          world == 1 ? "" : "s", world));
    }
    Config run = config;  // what else check_shard_group asks (link.ranks)
    set_mode(run.parallel, m);
    run.key_locations["parallel.shard_group"] =
        fmt::format("{}: bench.modes: \"{}\"", where_set(config, "bench.modes"), m.name());
    check_shard_group(run, world);
  }
}

void check_bench_study_device(const Config& config, const std::vector<Mode>& modes, int world,
                              DeviceKind device) {
  if (device != DeviceKind::Cuda) return;
  std::vector<std::string> study;
  for (const Mode& m : modes) {
    if (planned_ranks(config, bench_mode_plan(m, config, config.precision, world), world) > world) {
      study.push_back(fmt::format("\"{}\"", m.name()));
    }
  }
  if (study.empty()) return;
  throw UserError(fmt::format(
      "{}: link.ranks = {} above the {} real rank{} runs {} as a timing study of element shards, "
      "which runs on the CPU only, and this bench runs on CUDA: list bench.modes without {}, set "
      "runtime.device = \"cpu\", or unset link.ranks",
      where_set(config, "link.ranks"), config.link.ranks, world, world == 1 ? "" : "s",
      fmt::join(study, ", "), study.size() == 1 ? "it" : "them"));
}

void check_bench_memory(const Config& config, const World& world) {
  const ParameterStore layout = Model::parameter_layout(config.model);
  // The largest run's estimate (the trainer checks each run itself, on its device; here the runs
  // are counted on the host, where a CPU run allocates them beside the bench's own buffers).
  RankMemory need;
  for (const PlannedRun& run : plan_runs(config, world.size)) {
    const RankMemory e = estimate_peak_rank_memory(with_precision(config, run.precision),
                                                   run.planned.layout, run.planned.plan,
                                                   run.mode_plan);
    if (e.total() > need.total()) need = e;
  }
  // The bench's fp32 CPU copy of the model, and its optimizer measurement: parameters, gradients,
  // two moments and a master of at least kCpuBandwidthElements, held while it runs.
  const std::int64_t numel = layout.total_numel();
  const std::int64_t measured = std::max(numel, kCpuBandwidthElements);
  const std::int64_t own = numel * 4 + 5 * measured * 4;
  need.parameters += numel * 4 + measured * 4;
  need.gradients += measured * 4;
  need.state += 3 * measured * 4;
  // runtime.memory_limit_mb holds for the bench's own buffers too (each run's trainer checks only
  // its run), and is checked here, before the bench measures or allocates anything.
  if (config.runtime.memory_limit_mb > 0) {
    const auto limit = static_cast<std::int64_t>(config.runtime.memory_limit_mb * 1024.0 * 1024.0);
    if (need.total() > limit) {
      throw UserError(fmt::format(
          "{}: the bench needs an estimated {} on one rank, above runtime.memory_limit_mb = {:g} "
          "({}): its largest run, and the bench's own {} (a CPU copy of the model and the "
          "optimizer measurement's buffers); raise runtime.memory_limit_mb, or bench a smaller "
          "model.widths",
          where_set(config, "runtime.memory_limit_mb"), describe_memory(need),
          config.runtime.memory_limit_mb, human_bytes(limit), human_bytes(own)));
    }
  }
  check_memory_fits(need, config, DeviceKind::Cpu, available_memory(DeviceKind::Cpu),
                    world.local_size);
}

BenchReport run_bench(const Config& config, const World& world, const BenchOptions& options) {
  // Every wait for another rank in the bench is bounded by runtime.timeout_s (timed_mpi.h).
  const WaitLimit limit{world.rank, config.runtime.timeout_s};
  const std::vector<Mode> modes = bench_modes(config);
  check_bench_shard_groups(config, world.size);  // before anything is measured
  // The device the runs resolve (auto included, as the Trainer resolves it): the study's check on
  // it comes before minutes of measuring limits there; it lives until they are measured.
  auto device = std::make_unique<Device>(config.runtime.device, world, config.runtime.timeout_s,
                                         where_set(config, "runtime.device"));
  check_bench_study_device(config, modes, world.size, device->kind());
  const std::vector<double> caps = bench_caps(config);
  const std::vector<PrecisionConfig> precisions = bench_precisions(config);
  const bool root_prints = options.progress && world.is_root();
  const ParameterStore layout = Model::parameter_layout(config.model);  // not allocated

  BenchReport report;
  report.config_path = config.source_path;
  report.effective_config = to_toml(config);
  report.world_size = world.size;
  report.cpu_threads = cpu_threads(config.runtime.threads, world);
  report.parameters = layout.parameter_numel();
  report.warmup = config.bench.warmup;
  report.steps = config.bench.steps;
  report.link = config.link;
  report.link_label = link_label(config.link);
  if (root_prints) {
    fmt::print("{}", wrap_lines(fmt::format(
               "zerolap bench: {} ({} parameters) on {} rank{}, {} mode{} x {} bucket cap{}{}, "
               "{} warmup + {} timed steps each{}{}",
               config.source_path, report.parameters, world.size, world.size == 1 ? "" : "s",
               modes.size(), modes.size() == 1 ? "" : "s", caps.size(), caps.size() == 1 ? "" : "s",
               precisions.size() == 1 ? "" : fmt::format(" x {} precisions", precisions.size()),
               config.bench.warmup, config.bench.steps,
               config.bench.rounds == 1
                   ? ""
                   : fmt::format(", in each of {} rounds", config.bench.rounds),
               report.link_label.empty() ? "" : "; " + report.link_label), "  ", options.width));
    fmt::print("measuring limits (GEMM, memory bandwidth, optimizer, collectives)...\n");
    std::fflush(stdout);
  }

  // Every run once per round, rounds outermost; a row pools its rounds (Note [Bench rounds]).
  const std::vector<PlannedRun> runs = plan_runs(config, world.size);
  std::vector<CollectiveSize> sizes;
  for (const PlannedRun& run : runs) {
    // Each on its communicator's shape: the world, a shard group, the replicas.
    const CommSpans spans = comm_spans(run.mode_plan, config.link, world.size);
    for (const ProgramEntry& c : collective_program(run.mode_plan, run.planned.plan)) {
      const CommPlace& place = spans.place(c.comm);
      sizes.push_back({collective_name(c.op), c.dtype, c.bytes(), place.members, place.stride});
    }
  }
  report.limits = measure_limits(config, *device, world, precisions, sizes);
  device.reset();  // each run's Trainer holds its own

  std::vector<RoundTotals> totals(runs.size());  // over the rounds the rows pool
  const std::int64_t rounds = config.bench.rounds;
  Tracer bench_clock(world.rank, config.output.trace);  // the bench's trace timeline
  std::vector<TraceSource> trace;
  report.planned_runs = runs.size() * static_cast<std::size_t>(rounds);
  report.rounds = 0;
  for (std::int64_t round = 0; round < rounds && report.stopped_by == 0; ++round) {
    std::vector<Round> this_round;  // of the runs that finished, in order
    for (std::size_t i = 0; i < runs.size() && report.stopped_by == 0; ++i) {
      const PlannedRun& run = runs[i];
      const std::string precision_name = to_string(run.precision.compute);
      report.peak_rss_per_mode = reset_peak_rss() && report.peak_rss_per_mode;
      const double run_begin_us = bench_clock.now_us();
      const RunFigures real =
          timed_run(run_config(config, run.precision, run.mode, run.cap, false), world, false,
                    bench_clock, &trace);
      bench_clock.span("bench",
                       fmt::format("{} {} @ {:g} MiB", precision_name, run.mode.name(), run.cap),
                       run_begin_us, bench_clock.now_us(),
                       {{"precision", precision_name}, {"mode", run.mode.name()},
                        {"bucket_cap_mb", run.cap}, {"round", round + 1}});
      const RunFigures alone =
          timed_run(run_config(config, run.precision, run.mode, run.cap, true), world, true,
                    bench_clock, nullptr);
      if (round == 0 && i == 0) {  // the first run resolved runtime.device
        report.comm_priority = comm_priority_in_effect(config.runtime.comm_priority, real.device);
        report.device = real.device;
        const std::string warning =
            comm_priority_warning(config.runtime.comm_priority, real.device);
        if (root_prints && !warning.empty()) {
          fmt::print(stderr, "{}", wrap_lines(warning, "  ", options.width));
        }
      }
      this_round.push_back({real, alone});
      ++report.finished_runs;
      // This run's step, compute and exposed communication (max over ranks), for the log.
      std::vector<double> shown{real.total_s, alone.total_s, real.timeline.exposed_comm_s};
      max_over_ranks(world, limit, shown);
      if (root_prints) {
        const auto steps = static_cast<double>(config.bench.steps);
        fmt::print("{}", wrap_lines(fmt::format(
                   "[{}/{}] {}{}{} @ {:g} MiB: step {:.2f} ms, compute {:.2f} ms, exposed comm "
                   "{:.2f} ms",
                   report.finished_runs, report.planned_runs,
                   rounds == 1 ? "" : fmt::format("round {}/{}: ", round + 1, rounds),
                   precisions.size() == 1 ? "" : precision_name + " ", run.mode.name(), run.cap,
                   shown[0] / steps * 1e3, shown[1] / steps * 1e3, shown[2] / steps * 1e3),
                   "    ", options.width));
        std::fflush(stdout);
      }
      // After the last run nothing is left to stop: a signal during it gets the whole bench.
      if (options.stop_after_run && report.finished_runs < report.planned_runs) {
        report.stopped_by = options.stop_after_run();
      }
    }
    // Every row pools the same rounds: a round a signal cut short is kept only when it is the
    // first (the rows it finished are all there is).
    if (report.stopped_by == 0 || round == 0) {
      for (std::size_t i = 0; i < this_round.size(); ++i) totals[i].add(this_round[i]);
      ++report.rounds;
    }
  }

  for (std::size_t i = 0; i < runs.size(); ++i) {
    if (totals[i].rounds == 0) break;  // stopped before this run's first round
    report.rows.push_back(pooled_row(config, world, runs[i], totals[i], report.limits, layout));
  }

  for (BenchRow& row : report.rows) {
    for (const BenchRow& base : report.rows) {
      if (base.mode == Mode{}.name() && base.precision == row.precision &&
          base.reduce_dtype == row.reduce_dtype && base.bucket_cap_mb == row.bucket_cap_mb &&
          row.step_s > 0.0) {
        row.speedup_vs_ddp = base.step_s / row.step_s;
      }
    }
  }

  if (config.output.trace) {
    if (options.before_first_output) options.before_first_output();
    trace.push_back({bench_clock.events(), 0.0});
    write_trace(world, bench_clock, merge_trace_events(trace, world.rank),
                (std::filesystem::path(config.output.dir) / "trace.json").string(),
                config.runtime.timeout_s, {{"command", "bench"}, {"link", report.link_label}});
  }
  return report;
}

}  // namespace zl
