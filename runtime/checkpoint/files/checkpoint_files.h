// The rank-local half of checkpoints (the collective half: runtime/checkpoint/checkpoint.h): file
// names, when a checkpoint is due, the `latest` pointer, durable writes and directory fsync, the
// fault-injection test hook, and the validation of a checkpoint file against a model and optimizer
// before any rank is sent a byte of it. No MPI; rank 0 calls these.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/config/config.h"

namespace zl {

class SafetensorsReader;
class ParameterStore;

inline constexpr const char* kCheckpointFormat = "zerolap-checkpoint";
inline constexpr const char* kCheckpointFormatVersion = "1";
inline constexpr const char* kLatestPointerName = "latest";  // holds the newest file's name
// Metadata of a file `consolidate --no-optimizer` wrote ("true"): it cannot resume an optimizer
// that keeps state.
inline constexpr const char* kOptimizerStateOmittedKey = "optimizer_state_omitted";

// The value of `key` in a checkpoint's metadata (a file's __metadata__, a manifest's); "" when
// absent.
std::string metadata_value(const std::map<std::string, std::string>& metadata,
                           const std::string& key);
// The first `shown` of `names`, comma-separated, and " and <n> more" for the rest: names in a
// message, which a directory or a crafted checkpoint may hold any number of.
std::string name_list(const std::vector<std::string>& names, std::size_t shown = 4);
// `text`, all of it, as a non-negative decimal integer (a step, a count); nullopt for anything
// else.
std::optional<std::int64_t> parse_count(std::string_view text);

// Test hook for the crash-safety tests, never set in production: ZEROLAP_FAULT_CHECKPOINT =
// "after_write" (temp file complete and fsynced, not renamed) or "after_rename" (renamed, `latest`
// not yet updated), optionally ":STEP" to fire only at that step, makes rank 0 end the process at
// that point with _exit(kFaultExitCode) — no destructors, no flushing, as a SIGKILL would.
inline constexpr const char* kFaultEnvVar = "ZEROLAP_FAULT_CHECKPOINT";
inline constexpr int kFaultExitCode = 86;

// The tensor of a parameter's value (which = -1: the parameter's own name) or of its state
// states[which], named as torch.optim's state_dict: "optimizer.<param>.<state>".
std::string tensor_name(const std::string& param, const std::vector<std::string>& states,
                        int which);

// Suffix of a file being written; pruning removes those a crash left behind.
inline constexpr const char* kCheckpointTempSuffix = ".tmp";
// Prefix of the files of the start-up check that every rank shares a sharded checkpoint.dir
// (Note [A shared checkpoint.dir]); pruning removes those a kill left behind.
inline constexpr const char* kSharedDirCheckPrefix = ".zerolap_shared_check_";

// "step_00000120.safetensors": zero-padded so names sort in step order.
std::string checkpoint_file_name(std::int64_t step);
// The step of a checkpoint_file_name, or -1 for another name.
std::int64_t checkpoint_step_of(const std::string& file_name);
// "step_00000120": a sharded checkpoint's directory in checkpoint.dir; -1 for another name.
std::string sharded_dir_name(std::int64_t step);
std::int64_t sharded_step_of(const std::string& dir_name);

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

// The integer facts under their __metadata__ keys, in the order the loaders read and check them.
inline constexpr std::pair<const char*, std::int64_t CheckpointFacts::*> kFactKeys[] = {
    {"step", &CheckpointFacts::step},
    {"optimizer_step", &CheckpointFacts::optimizer_step},
    {"sampler_position", &CheckpointFacts::cursor},
    {"global_batch", &CheckpointFacts::global_batch},
    {"batches_per_epoch", &CheckpointFacts::batches_per_epoch},
    {"world_size", &CheckpointFacts::world_size}};

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

// --- the directory protocol ---------------------------------------------------------------------

// The checkpoint `latest` in `dir` points to; nullopt when there is no pointer yet. UserError when
// the pointer names a file that does not exist.
std::optional<std::string> latest_checkpoint(const std::string& dir);
// A checkpoint directory (one that holds a `latest` and is no sharded checkpoint), or its `latest`
// pointer, stands for the checkpoint `latest` names (zerolap inspect, checkpoint.resume = "PATH"):
// that checkpoint; nullopt when `path` is neither.
std::optional<std::string> checkpoint_named_by_latest(const std::string& path);
// The step of the checkpoint `latest` names in `dir`; -1 when it names none (or cannot be read:
// a run's next checkpoint replaces it).
std::int64_t latest_step(const std::string& dir);
// The checkpoint a run with checkpoint.resume loads: resume_path when set (a checkpoint directory
// or its pointer: the one `latest` names), else the one `latest` names in checkpoint.dir, else
// (no `latest`: removed, or the run stopped before writing it, a crash after its first checkpoint's
// rename or a full disk) the newest whole checkpoint there of the run its run.json names; nullopt
// when resume is off or there is no checkpoint yet. UserError (exit 2) when resume_path does not
// exist or is a directory that holds neither a manifest nor a `latest`.
std::optional<std::string> checkpoint_to_resume(const CheckpointConfig& c);
// Points `latest` at `file_name` atomically (temp file, fsync, rename, fsync the directory).
void write_latest_pointer(const std::string& dir, const std::string& file_name);
// Pruning to checkpoint.keep: runtime/checkpoint/files/checkpoint_pruning.h.
// fsync of a directory: makes a rename in it durable.
void sync_directory(const std::string& dir);
// The fault-injection hook (see kFaultEnvVar).
void checkpoint_fault_point(const char* point, std::int64_t step);

// Renames `temp` to `path` (atomic: a reader sees the old file or the new one, never half), then
// fsyncs the directory of `path`, which holds both, so that the rename is durable.
// RuntimeFailure "cannot rename <what>'<temp>' to '<path>'".
void rename_durably(const std::filesystem::path& temp, const std::filesystem::path& path,
                    const char* what = "");
// Replaces `dir`/`name` with `text` atomically: `name`.tmp written and fsynced (on failure it is
// removed: RuntimeFailure "cannot write <what> '<dir>/<name>.tmp': <reason>"), then
// rename_durably.
void replace_file_durably(const std::string& dir, const std::string& name, const std::string& text,
                          const char* what);

}  // namespace zl
