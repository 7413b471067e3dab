// A run's identity and the record of which run owns a directory (docs/checkpoints.md, "One owner
// per directory"): a fresh run gets a new run id; a resume inherits the run id of the checkpoint
// it loads (its __metadata__ "run_id"). Each directory a run writes (output.dir, checkpoint.dir)
// holds run.json, naming its owner and the launch that last wrote it. Rank-local, no MPI.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace zl {

inline constexpr const char* kRunRecordName = "run.json";
inline constexpr const char* kRunRecordFormat = "zerolap-run";
// The file a live run's rank 0 holds a lock on in each directory it writes
// (runtime/checkpoint/directory_lock.h); it stays when the run ends.
inline constexpr const char* kDirectoryLockName = ".zerolap.lock";
// Every file `zerolap train` or `zerolap bench` writes into output.dir.
inline constexpr const char* kRunOutputFiles[] = {"metrics.csv", "config.toml", "trace.json",
                                                  "bench.json", "bench.csv"};

// What run.json says. `command`, `world_size` and `config` are of the launch that wrote it last,
// so "the same command again" compares with them.
struct RunRecord {
  std::string run_id;
  std::string command;  // "train" or "bench"
  std::int64_t world_size = 0;
  std::string config;  // the effective config, to_toml
};

// A new run id: the UTC start time and 32 random bits, "20261203-140553-3f2a9c1b".
std::string new_run_id();

// run.json of `dir`; nullopt when there is none. UserError (exit 2) naming the file when it exists
// but cannot be read as a run record (not a regular file, not JSON, fields missing): it is
// reported as unreadable, never taken for another run's config.
std::optional<RunRecord> read_run_record(const std::string& dir);
// Writes `dir`/run.json atomically (temp file, fsync, rename, fsync the directory); creates dir.
void write_run_record(const std::string& dir, const RunRecord& record);

// A value of a checkpoint's metadata (a file's __metadata__, a sharded one's manifest): "" when it
// has none (a run id: written before run ids), nullopt when it cannot be read as a checkpoint.
std::optional<std::string> checkpoint_metadata_value(const std::string& path, const char* key);

// Whether two checkpoints (files, sharded directories or their manifests) are the same one: the
// same file, or a copy of it (the same __metadata__, whose CRC32s cover every tensor, and for a
// sharded one the same shards' CRC32s). A fine-tune inherits its base run's id, so two branches of
// a run at one step differ here alone (docs/checkpoints.md, "One owner per directory"). false when
// either cannot be read.
bool same_checkpoint(const std::string& a, const std::string& b);

}  // namespace zl
