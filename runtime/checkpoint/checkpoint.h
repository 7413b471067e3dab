// Checkpoints of a training state (runtime/train/run/training_state.h) as safetensors files (docs/checkpoints.md): parameters by name,
// optimizer state as optimizer.<param>.<state>, the run's position and facts in __metadata__.
// ZeRO state is gathered to rank 0 one bucket at a time and, on load, scattered into the *current*
// bucket plan (so a run resumes on another world size, mode or bucket size). Rank 0 writes with the
// crash-safe protocol: temp file, fsync, rename, fsync the directory, then the `latest` pointer the
// same way. Functions taking a TrainingState are collective over its world and read or write a
// quiescent state (Trainer::state() waits for in-flight work); the others are rank-local.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/config/config.h"
#include "runtime/train/run/training_state.h"

namespace zl {

class SafetensorsReader;
class ParameterStore;

inline constexpr const char* kCheckpointFormat = "zerolap-checkpoint";
inline constexpr const char* kCheckpointFormatVersion = "1";
inline constexpr const char* kLatestPointerName = "latest";  // holds the newest file's name

// Test hook for the crash-safety tests, never set in production: ZEROLAP_FAULT_CHECKPOINT =
// "after_write" (temp file complete and fsynced, not renamed) or "after_rename" (renamed, `latest`
// not yet updated), optionally ":STEP" to fire only at that step, makes rank 0 end the process at
// that point with _exit(kFaultExitCode) — no destructors, no flushing, as a SIGKILL would.
inline constexpr const char* kFaultEnvVar = "ZEROLAP_FAULT_CHECKPOINT";
inline constexpr int kFaultExitCode = 86;

// "step_00000120.safetensors": zero-padded so names sort in step order.
// The optimizer-state tensor of a parameter, named as torch.optim's state_dict:
// "optimizer.<param>.<state>".
std::string state_tensor_name(const std::string& param, const std::string& state);

// Suffix of a file being written; pruning removes those a crash left behind.
inline constexpr const char* kCheckpointTempSuffix = ".tmp";

std::string checkpoint_file_name(std::int64_t step);
// The step of a checkpoint_file_name, or -1 for another name.
std::int64_t checkpoint_step_of(const std::string& file_name);

// True when checkpoint.dir is set and `step` is a multiple of checkpoint.every or the last step.
bool checkpoint_due(const CheckpointConfig& config, std::int64_t step, std::int64_t total_steps);

// The run's position and facts from a checkpoint's __metadata__.
struct CheckpointFacts {
  std::int64_t step = 0;            // optimizer steps completed (TrainingPosition::step)
  std::int64_t optimizer_step = 0;  // t: drives bias correction and the LR schedule
  std::int64_t cursor = 0;          // the sampler position (TrainingPosition::cursor)
  std::int64_t global_batch = 0;    // samples per micro-batch over all ranks, when written
  std::int64_t batches_per_epoch = 0;  // micro-batches per epoch, when written
  std::int64_t world_size = 0;
  std::string config_toml;  // the writer's effective config (to_toml)
};

// Validates a checkpoint for a model and optimizer without MPI: format, CRC32s, optimizer kind,
// every parameter and state tensor present as F32 with the parameter's shape, nothing unexpected,
// and every value and run fact within its meaning (checkpoint_values.h), read in the checksums'
// pass. Throws UserError naming the file and the tensor or key, and how to fix it.
CheckpointFacts check_checkpoint(const SafetensorsReader& file, const ParameterStore& store,
                                 const OptimizerConfig& optimizer,
                                 const std::vector<std::string>& state_names);

// The sampler position to continue from when the global batch (local batch x world size) changed:
// the same epoch, at the first batch that starts at or after the samples already consumed.
std::int64_t convert_cursor(const CheckpointFacts& facts, std::int64_t global_batch,
                            std::int64_t batches_per_epoch);

// "section.key" of every line that differs between two to_toml texts (for the resume note).
std::vector<std::string> config_differences(const std::string& a_toml, const std::string& b_toml);

// Writes `state` to `path` atomically: rank 0 writes `path`.tmp, fsyncs, renames, fsyncs the
// directory. Collective.
void write_checkpoint(const TrainingState& state, const std::string& path);
// A checkpoint of the current step into checkpoint.dir, then `latest` and pruning to
// checkpoint.keep. Collective. Returns the path.
std::string save_checkpoint(const TrainingState& state);
// save_checkpoint when checkpoint_due for the state's step.
void save_checkpoint_if_due(const TrainingState& state);

// Restores parameters, optimizer state (resharded into the state's bucket plan), step count and
// sampler position from `path` (read on rank 0). Collective; a bad file is a UserError reported
// once and thrown as ReportedUserError on every rank.
void load_checkpoint(const TrainingState& state, const std::string& path);

// Before a run: creates checkpoint.dir and, when checkpoint.resume asks for it, loads the
// configured path or the latest checkpoint of the dir (none yet: starts from step 0 with a note).
// Collective.
void prepare_checkpoints(const TrainingState& state);

// --- the directory protocol (rank-local; rank 0 calls these) --------------------------------------

// The checkpoint `latest` in `dir` points to; nullopt when there is no pointer yet. UserError when
// the pointer names a file that does not exist.
std::optional<std::string> latest_checkpoint(const std::string& dir);
// Points `latest` at `file_name` atomically (temp file, fsync, rename, fsync the directory).
void write_latest_pointer(const std::string& dir, const std::string& file_name);
// Pruning to checkpoint.keep: runtime/checkpoint/checkpoint_pruning.h.
// fsync of a directory: makes a rename in it durable.
void sync_directory(const std::string& dir);
// The fault-injection hook (see kFaultEnvVar).
void checkpoint_fault_point(const char* point, std::int64_t step);

}  // namespace zl
