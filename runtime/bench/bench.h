// `zerolap bench`: every precision x bucket cap x overlap mode of a config, measured side by side
// in one launch, next to the machine's limits in each precision (runtime/bench/bench_limits.h).
// Collective: every rank calls run_bench with the same config; rank 0 gets the complete report
// (other ranks a partial one).
//
// Note [Bench timing]: each (precision, cap, mode) gets a fresh Trainer; bench.warmup steps run
// untimed, then synchronize + barrier, bench.steps timed steps, synchronize + barrier. The bracket
// covers the whole sequence because overlap modes carry a step's broadcasts into the next forward;
// the time of a mode is the maximum over ranks. The mode's compute time is measured the same way on
// a ComputeOnlyCommunicator (same ranks, same bucket plan and shards, no data moved), so exposed
// communication = step time - compute time is what communication adds to the step.
//
// Note [Bench rounds]: with bench.rounds = R every run (and its twin) is repeated R times, the
// whole list once per round, and a row pools its rounds: its totals are summed, its per-step
// times concatenated (steps x R of them). So a slow spell of a shared machine falls on every row
// of one round instead of on the rows that happened to run during it, and rows compare side by
// side. Each round is a fresh Trainer with its own warmup, so rows stay independent runs. A
// row's figures are the slowest rank's totals over all its rounds, divided by steps x R. Every
// row pools the same rounds: a bench stopped during round r > 1 drops that round's runs; one
// stopped during round 1 keeps the rows that round finished.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "runtime/bench/bench_limits.h"
#include "runtime/config/config.h"
#include "runtime/config/mode.h"
#include "runtime/comm/world.h"
#include "runtime/train/plan/mode_plan.h"

namespace zl {

// The ModePlan of a run of `mode` (one of all_modes(), runtime/config/mode.h) in `precision` on
// `world` ranks: what the trainer of that run plans (make_run_mode_plan: train.grad_accum, the
// shard group's replicas).
ModePlan bench_mode_plan(const Mode& mode, const Config& config, const PrecisionConfig& precision,
                         int world);
// The modes of config.bench.modes (all that can run the config when empty). Config validation
// has checked the list: each entry is one of all_modes() and can run the config.
std::vector<Mode> bench_modes(const Config& config);

// Every hybrid mode of bench.modes (hsdp<stage>/<overlap>@G) must split `world` ranks into
// groups of G (check_shard_group): a UserError naming the mode, G and the world size otherwise
// (exit 2), which `zerolap bench` and run_bench raise before measuring anything.
void check_bench_shard_groups(const Config& config, int world);
// The link.ranks study of element shards runs on the CPU only (check_trainable, trainer_setup.h):
// on `device` CUDA, UserError (exit 2) naming the modes of `modes` that would run it, before the
// first timed run rather than at theirs.
void check_bench_study_device(const Config& config, const std::vector<Mode>& modes, int world,
                              DeviceKind device);

// The bench's memory check, before it allocates anything: the CPU copy of the model the bench
// keeps for its figures, the buffers its optimizer measurement times, and the largest run of its
// modes x bucket caps x precisions. Throws UserError (exit 2) naming the estimate and the key to
// change when the bench would not fit this node's memory (MemAvailable shared by the node's
// ranks) or runtime.memory_limit_mb. Rank-local.
void check_bench_memory(const Config& config, const World& world);

// One row of the results: one mode at one bucket cap in one precision. Times are seconds per step,
// the maximum over ranks; per-rank figures are vectors indexed by rank.
struct BenchRow {
  std::string precision;        // the compute precision: "fp32", "tf32", "bf16"
  std::string reduce_dtype;     // of the gradient collectives: "fp32", "bf16"
  std::string master_weights;   // bf16: "fp32" or "remainders"; else "fp32" (inert)
  std::string mode;
  double bucket_cap_mb = 0.0;
  int buckets = 0;
  std::int64_t samples_per_step = 0;  // over all ranks

  double step_s = 0.0;  // bracketed time / steps (Note [Bench timing])
  double step_median_s = 0.0, step_p10_s = 0.0, step_p90_s = 0.0;  // per-step times
  double samples_per_s = 0.0;
  std::optional<double> speedup_vs_ddp;  // ddp's step_s at the same cap / step_s

  // Note [Phase times]: forward, backward and optimizer are busy times from the streams' own
  // timeline (CUDA events where the model is on a GPU, the host clock of the thread that runs
  // them on the CPU; runtime/trace/timeline_summary.h): forward without its waits for
  // broadcasts (wait_s), optimizer on whichever stream stepped. finish_backward_s is the main
  // thread's wall time in the mode's schedule; comm_busy_s the time both comm streams spent in
  // collectives (their counters, summed).
  double forward_s = 0.0, backward_s = 0.0, finish_backward_s = 0.0, optimizer_s = 0.0;
  double wait_s = 0.0;
  double comm_busy_s = 0.0;
  // The compute-only run of the same mode (Note [Bench timing]); its phases from its timeline.
  double compute_s = 0.0, compute_forward_s = 0.0, compute_backward_s = 0.0,
         compute_optimizer_s = 0.0;
  // Note [Exposed communication] (runtime/trace/timeline_summary.h), from the timeline: the
  // union of the reductions' / broadcasts' / all collectives' spans, the part of it that compute
  // covered (hidden) and did not (exposed, >= 0 by construction), and time when nothing ran.
  double reduction_s = 0.0, broadcast_s = 0.0, comm_s = 0.0;
  double hidden_comm_s = 0.0, exposed_comm_s = 0.0, idle_s = 0.0;
  double comm_overhead_s = 0.0;  // step_s - compute_s: the two runs' difference (noisy, may be < 0)
  double phases_vs_step = 0.0;   // (forward + backward + optimizer) / step_s
  // Per bucket, per step (JSON only): its reduction, its optimizer step, its broadcast.
  std::vector<double> bucket_reduction_s, bucket_step_s, bucket_broadcast_s;

  // Note [Ideal step]: comm_model_s = the mode's collectives per step timed alone at their sizes
  // (BenchLimits::collectives); nonoverlap_comm_s = the last bucket's collective (+ its
  // broadcast in zero), which no schedule can hide; ideal = max(compute, comm - nonoverlap) +
  // nonoverlap, a lower bound.
  double comm_model_s = 0.0, nonoverlap_comm_s = 0.0, ideal_step_s = 0.0;
  double vs_ideal = 0.0;  // step_s / ideal_step_s
  // Note [Scaling model] (scaling_model.h) for this mode from compute_s and the same collective
  // times: where its schedule lets communication overlap (>= ideal_step_s).
  double predicted_step_s = 0.0;

  // Per tier of the link (indexed by LinkTier: inter, intra; each communicator has one: its span's,
  // collective_program.h's comm_spans): its collectives timed alone (from the limits, as
  // comm_model_s), their union on the timeline and its parts compute covered and did not (as
  // comm_s, hidden_comm_s, exposed_comm_s, from those communicators' streams), and the bytes
  // its communicators sent per step (max over ranks). Without link.node_ranks everything is
  // inter. The step verdict's all-reduce on a hybrid row's comm.world is in the timeline's inter
  // figures, not in its bytes.
  struct TierFigures {
    double comm_model_s = 0.0;
    double comm_s = 0.0, hidden_comm_s = 0.0, exposed_comm_s = 0.0;
    std::int64_t wire_bytes_per_step = 0;
  };
  std::array<TierFigures, 2> tiers{};

  std::int64_t wire_bytes_per_step = 0;     // per rank, max over ranks (communicator.h)
  std::int64_t payload_bytes_per_step = 0;  // per rank, max over ranks
  // Per rank, what the trainer allocated and what `zerolap plan` prints for it (ModePlan's
  // rank_memory; equal, tested): the optimizer state alone, and the model's state = parameters
  // + gradients (with the bf16 reduce buffer) + masters + optimizer state.
  std::vector<std::int64_t> optimizer_state_bytes, planned_optimizer_state_bytes;
  std::vector<std::int64_t> state_bytes, planned_state_bytes;
  std::vector<std::int64_t> peak_rss_bytes;  // per rank, the highest of its runs (VmHWM)
  std::vector<double> step_times_s;  // per timed step, max over ranks: steps x rounds, in order
};

struct BenchReport {
  std::string config_path;
  std::string effective_config;  // to_toml of the config: which run wrote bench.json
  int world_size = 1;
  std::int64_t parameters = 0;
  std::int64_t warmup = 0, steps = 0;
  std::int64_t rounds = 1;  // the rounds every row pools (bench.rounds unless stopped)
  LinkConfig link;
  std::string link_label;    // empty: real communication
  CommPriority comm_priority = CommPriority::Normal;  // in effect (realtime may be refused)
  int cpu_threads = 1;  // CPU GEMM threads per rank (runtime.threads resolved, rank 0's)
  DeviceKind device = DeviceKind::Cpu;  // where the runs' models were (runtime.device resolved)
  bool peak_rss_per_mode = true;  // false: VmHWM could not be reset, peaks are since start-up
  BenchLimits limits;           // per precision where they depend on it
  std::vector<BenchRow> rows;  // precisions outer, then caps, modes inner
  // precisions x caps x modes x rounds, and those that ran (all of them when not stopped).
  std::size_t planned_runs = 0, finished_runs = 0;
  int stopped_by = 0;  // the signal the ranks stopped for after finished_runs (0: complete)
};

// Narrow: every line the bench prints fits 100 columns (tables: the columns a comparison of modes
// needs, the rest are in the JSON and CSV); Wide (`zerolap bench --wide`): every column, and
// lines as long as they come.
enum class TableWidth { Narrow, Wide };

struct BenchOptions {
  bool progress = true;  // progress lines on rank 0
  TableWidth width = TableWidth::Narrow;  // of the progress lines
  // Collective, after every run but the last: nonzero (a signal) stops the bench after that run,
  // the same run on every rank; the report then holds the rows of the rounds that finished
  // (Note [Bench rounds]; stopped_by says why).
  std::function<int()> stop_after_run;
  // Rank 0, before the bench writes its first file into output.dir (trace.json): the command
  // takes the directory then (run_outputs.h), not before minutes of measuring that may not finish.
  std::function<void()> before_first_output;
};

// Runs the whole bench (collective); writes output.dir/trace.json when output.trace is set.
BenchReport run_bench(const Config& config, const World& world, const BenchOptions& options = {});

}  // namespace zl
