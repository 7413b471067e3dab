// Checkpoints of a training state (runtime/train/run/training_state.h) as safetensors files
// (docs/checkpoints.md), the collective half: parameters by name, optimizer state as
// optimizer.<param>.<state>, the run's position and facts in __metadata__. ZeRO state is gathered
// to rank 0 one bucket at a time and, on load, scattered into the *current* bucket plan (so a run
// resumes on another world size, mode or bucket size). Rank 0 writes with the crash-safe protocol:
// temp file, fsync, rename, fsync the directory, then the `latest` pointer the same way. Every
// function here is collective over the state's world and reads or writes a quiescent state
// (Trainer::state() waits for in-flight work). The rank-local half (file names, `latest`, the
// validation of a file): runtime/checkpoint/files/checkpoint_files.h.
#pragma once

#include <string>

#include "runtime/train/run/training_state.h"

namespace zl {

// Writes `state` to `path` atomically: rank 0 writes `path`.tmp, fsyncs, renames, fsyncs the
// directory. Collective.
void write_checkpoint(const TrainingState& state, const std::string& path);
// A checkpoint of the current step into checkpoint.dir, then `latest` and pruning to
// checkpoint.keep. Collective. Returns the path.
std::string save_checkpoint(const TrainingState& state);

// Restores parameters, optimizer state (resharded into the state's bucket plan), step count and
// sampler position from `path` (read on rank 0). Collective; a bad file is a UserError reported
// once and thrown as ReportedUserError on every rank.
void load_checkpoint(const TrainingState& state, const std::string& path);

// Before a run: creates checkpoint.dir and, when checkpoint.resume asks for it, loads the
// configured path or the latest checkpoint of the dir (none yet: starts from step 0 with a note).
// Collective.
void prepare_checkpoints(const TrainingState& state);

}  // namespace zl
