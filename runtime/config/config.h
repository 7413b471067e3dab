// The run configuration: TOML files (see docs/config.md) plus `--set section.key=value`
// overrides. Parsing validates everything up front: an unknown key, a
// wrong type or an out-of-range value is a UserError that names the key and its file and line.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/dtype.h"
#include "kernels/elementwise.h"
#include "kernels/optim_math.h"
#include "data/dataset.h"
#include "models/model.h"
#include "runtime/comm/comm_options.h"  // DeviceChoice, CommPriority, LinkConfig

namespace zl {

enum class DataKind { FashionMnist, Idx, Spirals, Teacher };
enum class ParallelMode { Ddp, Zero };
enum class Overlap { None, AfterBackward, Interleaved };
// zero's collectives: a bucket's gradients all-reduced or reduced to the rank that owns the bucket,
// which broadcasts it after its step; or every bucket split element-wise across all ranks,
// reduce-scattered and all-gathered (docs/design.md, "Element shards").
enum class CollectiveKind { AllreduceBroadcast, ReduceBroadcast, ReduceScatterAllgather };
enum class AssignmentPolicy { RoundRobin, Greedy };
enum class LrSchedule { Constant, Cosine };
// What forward and backward compute in: fp32; fp32 storage with TF32 tensor-core GEMMs (CUDA; on
// the CPU the same as fp32); bf16 parameters, activations and gradients with fp32 accumulation.
enum class ComputePrecision { Fp32, Tf32, Bf16 };
// What a step whose loss or gradient norm is non-finite does (docs/design.md, "Divergence"):
// end the run with exit 1 and no checkpoint of it, or skip its optimizer step on every rank.
enum class OnNonfinite { Stop, SkipStep };

struct DataConfig {
  DataKind kind = DataKind::FashionMnist;
  std::string path = kDefaultFashionMnistDir;  // fashion_mnist: the directory
  // idx: the four files (plain or .gz)
  std::string train_images, train_labels, test_images, test_labels;
  std::int64_t batch_size = 64;       // per rank (with global_batch_size: derived, global_batch.h)
  // 0: off. Otherwise batch_size x world x train.grad_accum equals it: batch_size is the largest
  // per-rank micro-batch and both are derived for the world size (runtime/config/global_batch.h).
  std::int64_t global_batch_size = 0;
  // Not keys: batch_size and train.grad_accum as configured, kept by apply_global_batch (0: not
  // applied), so to_toml writes a config that holds at any world size.
  std::int64_t configured_batch_size = 0;
  std::int64_t configured_grad_accum = 0;
  std::int64_t eval_batch_size = 1000;  // per rank, evaluation only
  bool shuffle = true;
  std::uint64_t seed = 0;
  // synthetic sets (spirals: classes = model output width; teacher: dims from model.widths)
  std::int64_t train_samples = 8192;
  std::int64_t test_samples = 2048;
  float noise = 0.2f;
  std::int64_t teacher_hidden = 64;
  TaskKind teacher_task = TaskKind::Regression;
};

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::Adam;
  float lr = 1e-3f;
  float beta1 = 0.9f, beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
  float momentum = 0.0f;
  float dampening = 0.0f;
  bool nesterov = false;
  LrSchedule schedule = LrSchedule::Constant;
  std::int64_t warmup_steps = 0;  // linear warm-up from 0 to lr over these steps (any schedule)
  float min_lr = 0.0f;            // cosine decays towards this (reached after the last step)
};

struct ParallelConfig {
  ParallelMode mode = ParallelMode::Ddp;
  Overlap overlap = Overlap::None;
  CollectiveKind collective = CollectiveKind::AllreduceBroadcast;
  // Which rank owns a bucket (bucket collectives); unused with reduce_scatter_allgather, where
  // rank r owns shard r of every bucket (`zerolap plan` says so).
  AssignmentPolicy assignment = AssignmentPolicy::RoundRobin;
  // ZeRO stage: 1 shards the optimizer state (and bf16 masters); 2 also the gradients between
  // steps; 3 also the parameters, gathered per bucket where forward and backward need them
  // (2 and 3: reduce_scatter_allgather only).
  int zero_stage = 1;
  // Stage 3: buckets whose all-gather is issued ahead of the one a layer waits for, in forward
  // and in backward order; and whether a bucket's gather buffer is released after its last
  // forward layer (true) or kept until its backward (FSDP2's reshard_after_forward).
  int prefetch = 1;
  bool reshard_after_forward = true;
  // reduce_scatter_allgather: element shards inside groups of this many consecutive ranks,
  // replicated across the groups (hybrid sharding, docs/design.md); 0: one group of every rank.
  int shard_group = 0;
  double bucket_cap_mb = 25.0;
  double first_bucket_cap_mb = 1.0;
};

// [precision] (docs/design.md, "Precision"). Defaults are plain fp32 training.
struct PrecisionConfig {
  ComputePrecision compute = ComputePrecision::Fp32;
  DType reduce_dtype = DType::F32;  // of the gradient collectives; bf16 halves their bytes
  MasterWeights master_weights = MasterWeights::Fp32;  // bf16 only: fp32 copy or int16 remainders
};

struct TrainConfig {
  std::int64_t steps = 0;   // exactly one of steps / epochs is set (steps = 0 with epochs = 0: no
  std::int64_t epochs = 0;  // training, e.g. to write the initial checkpoint)
  std::int64_t log_every = 50;
  std::int64_t eval_every = 0;  // 0: evaluate only at the end
  std::int64_t grad_accum = 1;
  float clip_grad_norm = 0.0f;  // 0: off
  OnNonfinite on_nonfinite = OnNonfinite::Stop;
  // > 0: a step whose training loss (mean over its micro-batches) on any rank is above this is
  // treated as non-finite (docs/design.md, "Divergence"). 0: only NaN and inf are.
  double max_loss = 0.0;
  // on_nonfinite = "skip_step": this many skipped steps in a row end the run as "stop" does (exit
  // 1, no checkpoint of them): a run that only skips is not training.
  std::int64_t max_consecutive_skips = 10;
};

// checkpoint.format (docs/checkpoints.md): one file written by rank 0, or a shard per rank and a
// manifest (runtime/checkpoint/sharded_checkpoint.h).
enum class CheckpointFormat { SingleFile, Sharded };

struct CheckpointConfig {
  std::string dir;        // empty: no checkpoints
  std::int64_t every = 0;  // 0: only at the end
  std::int64_t keep = 3;
  bool resume = false;       // true: latest in dir, or resume_path when set
  std::string resume_path;  // resume = "path"
  // true: replace or remove another run's checkpoints in dir (runtime/checkpoint/run_outputs.h).
  bool overwrite = false;
  CheckpointFormat format = CheckpointFormat::SingleFile;
  // true: stage into host memory and write in the background while training goes on (sharded
  // format only; runtime/checkpoint/checkpoint_saver.h).
  bool async = false;
};

struct RuntimeConfig {
  DeviceChoice device = DeviceChoice::Auto;
  int threads = kAutoThreads;  // CPU GEMM threads per rank; kAutoThreads: its share of the node
  double timeout_s = 300;  // a collective that takes longer is a failure (exit 1), not a hang
  CommPriority comm_priority = CommPriority::Normal;  // of the MPI comm threads; a hint
  // MiB one rank may use (runtime/train/plan/memory_limit.h); 0: the node's available memory or the
  // GPU's free memory, as measured.
  double memory_limit_mb = 0;
};

struct BenchConfig {
  std::vector<std::string> modes;  // empty: every mode (see runtime/bench)
  std::vector<double> bucket_cap_mb;  // empty: parallel.bucket_cap_mb
  // The compute precisions to sweep; empty: precision.compute. A bf16 row takes reduce_dtype and
  // master_weights from [precision]; fp32 and tf32 rows use fp32 for both.
  std::vector<ComputePrecision> precision;
  std::int64_t warmup = 5;
  std::int64_t steps = 30;
  // Every run this many times, the whole list once per round (Note [Bench rounds]).
  std::int64_t rounds = 1;
};

struct OutputConfig {
  std::string dir = "runs/default";
  bool trace = false;
  // `zerolap train`: the steps the trace records, the first ones this process trains; 0: every
  // step (a trace grows by every step's spans, in memory until the run ends).
  std::int64_t trace_steps = 100;
  // true: replace another run's outputs in dir (runtime/checkpoint/run_outputs.h).
  bool overwrite = false;
};

struct Config {
  std::string source_path;  // the TOML file this came from
  // Where parse_config read each key: "file:line", the flag that set it ("--set train.steps"),
  // or for a key left at its default its section's line or the file. Read through where_set.
  std::map<std::string, std::string> key_locations;
  ModelSpec model;
  DataConfig data;
  OptimizerConfig optimizer;
  ParallelConfig parallel;
  PrecisionConfig precision;
  TrainConfig train;
  CheckpointConfig checkpoint;
  RuntimeConfig runtime;
  BenchConfig bench;
  LinkConfig link;
  OutputConfig output;
  // Not a key: this run's identity (runtime/checkpoint/files/run_identity.h), set on rank 0 by the
  // ownership check before training and recorded in every checkpoint it writes.
  std::string run_id;
};

// A command-line flag that sets a config key, such as `zerolap plan --link-gbps 400` for
// link.bandwidth_gbps: applied as an override after the --set ones, so the flag gets exactly the
// key's type and range checks, and a message names the flag.
struct FlagOverride {
  std::string flag;   // "--link-gbps"
  std::string key;    // "link.bandwidth_gbps"
  std::string value;  // TOML text: "400"
};

// Reads and validates `path`, then applies `overrides` ("section.key=value"; the value is read as
// a TOML value, a bare word as a string) and `flags`. Throws UserError naming the key, file and
// line (or flag).
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {},
                   const std::vector<FlagOverride>& flags = {});

// Where `key` ("parallel.shard_group") of `config` was set, as messages of the checks that run
// after parsing begin: key_locations' entry, else source_path (a Config built in code).
std::string where_set(const Config& config, const std::string& key);

// Same, from TOML text (tests); `source_name` stands in for the path in messages.
Config parse_config(const std::string& toml_text, const std::string& source_name,
                    const std::vector<std::string>& overrides = {},
                    const std::vector<FlagOverride>& flags = {});

// Every full key ("section.key") the reader accepts, in reading order (docs/config.md lists
// them; a test compares the two).
std::vector<std::string> accepted_config_keys();

// The effective configuration as canonical TOML (every key, defaults filled in). Written next to
// run outputs and hashed (config_hash) into checkpoints.
std::string to_toml(const Config& config);
// Whether a key ("section.key", as to_toml spells it) can change what a run computes. False for
// [checkpoint] and [output] (where a run writes, whether it resumed), runtime.timeout_s,
// runtime.comm_priority and runtime.memory_limit_mb (how long it waits for a peer, how its comm
// threads are scheduled, what memory it may use).
bool key_affects_results(const std::string& key);
// The keys that affect results with their canonical TOML values, in to_toml's order:
// {"train.steps", "30"}, {"optimizer.lr", "0.001"}, ... (ranks compare them at start-up).
std::vector<std::pair<std::string, std::string>> result_entries(const Config& config);
// "section.key" of each results-affecting key whose value differs between two to_toml texts (a
// run's, a checkpoint's, a saved config.toml): for the resume note and the ownership rule.
std::vector<std::string> result_differences(const std::string& a_toml, const std::string& b_toml);
// 16 hex digits: FNV-1a 64 of the lines of to_toml whose keys affect results (section headers
// included), so a resumed run that continues bitwise hashes like the run it continues.
std::string config_hash(const Config& config);

// The communicator options of [runtime].
inline CommOptions comm_options(const RuntimeConfig& runtime) {
  return CommOptions{runtime.timeout_s, runtime.comm_priority};
}

// Names used in configs, logs and tables.
const char* to_string(ParallelMode m);
const char* to_string(Overlap o);
const char* to_string(CheckpointFormat f);
const char* to_string(CollectiveKind c);
const char* to_string(AssignmentPolicy a);
const char* to_string(OptimizerKind k);
const char* to_string(DataKind k);
const char* to_string(LrSchedule s);
const char* to_string(DeviceChoice d);
const char* to_string(CommPriority p);
const char* to_string(ComputePrecision c);
const char* to_string(MasterWeights m);
const char* to_string(OnNonfinite o);

}  // namespace zl
