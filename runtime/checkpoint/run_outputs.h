// One owner per directory (docs/checkpoints.md, "One owner per directory"): before a run writes
// anything, rank 0 decides the run's identity (run_identity.h) and whether it may write into
// output.dir and checkpoint.dir. A directory is written only by the run that owns it (the run
// its run.json names):
//  - a resume inherits the run id of the checkpoint it loads, and proceeds in that run's
//    directories whatever keys changed (lr, world size, mode); that run's checkpoints after the
//    step it resumes from are removed once the checkpoint is loaded (one line says so); but a
//    resume from outside checkpoint.dir (a fine-tune) is exit 2 when `latest` there names another
//    branch's checkpoint: a later one, or one at its step that is not the one it loads;
//  - output.dir follows the checkpoint.dir its run.json names: a run of the same id with another
//    checkpoint.dir, whose `latest` is still the run's and not where this run starts, is exit 2
//    (a fine-tune shares its base's id, and would replace the base's metrics);
//  - another run's checkpoint in checkpoint.dir after the step this run starts from, under a name
//    this run writes (copied in by hand), is exit 2: the run would replace it, then prune it;
//  - checkpoint.resume = true with nothing to resume yet (no `latest`), into directories both
//    owned by one training run, restarts that run from step 0, on any world size (with the run's
//    whole checkpoints there but no `latest`, it resumes the newest: checkpoint_to_resume);
//  - a fresh run whose command equals the one that last wrote a directory (the same
//    results-affecting config, world size and subcommand: the same command again) takes that
//    run's identity and replaces its outputs, as a rerun always has; but where the run's newest
//    checkpoint is short of its last step (interrupted) it is exit 2, unless checkpoint.overwrite;
//  - any other run into a directory that holds another run's files is exit 2 naming that run and
//    the `overwrite` key; with output.overwrite / checkpoint.overwrite = true it takes the
//    directory (the other runs' checkpoints are removed once this run has loaded its own);
//  - but another run's checkpoints in output.dir, or its outputs in checkpoint.dir, are exit 2
//    whatever the overwrite keys, unless the directory is both keys of this run: the directory
//    is the other run's other one, which its next launch needs.
// A directory with run.json but none of a run's files (a run that failed before its first file) is
// free to a run that is not its owner.
// A live run's directories are refused before this rule reads them (directory_lock.h).
#pragma once

#include <string>
#include <vector>

#include "runtime/checkpoint/files/run_identity.h"
#include "runtime/config/config.h"

namespace zl {

// What the ownership rule decided for a launch. Nothing is written when it is decided: a launch
// refused by a later start-up check (the memory limit, a shard group, a data file) leaves the
// directories as it found them, so the owner's next run is not told they belong to a run that
// never ran.
struct RunOutputsClaim {
  RunRecord record;        // this launch's run.json, for output.dir and checkpoint_dir
  std::string checkpoint_dir;  // a training run's checkpoint.dir ("": none, or the bench)
  // output.overwrite takes another run's outputs in output.dir: those this launch does not write
  // itself are removed before it writes its own (so none of them, a trace.json this run does not
  // write, stays beside them), the others it replaces; and the line said then.
  std::vector<std::string> taken_files;
  std::string taken_note;
  // Checkpoint names in checkpoint.dir removed once the run's checkpoint loaded; the checkpoint it
  // resumed from, when in checkpoint.dir; the one line said when they are removed.
  std::vector<std::string> removals;
  std::string keep_name;
  std::string removal_note;
};

// Rank 0 of `zerolap train`, before the run writes anything: decides the run's identity (sets
// config.run_id) and whether it may write into output.dir and checkpoint.dir. Throws UserError
// (exit 2) naming the directory, its owner, why this run is not that run, and the choices,
// including the overwrite key; or naming an unreadable run.json or config.toml.
RunOutputsClaim check_run_outputs(Config& config, int world_size);

// Rank 0 of `zerolap bench`, before it measures: the same rule for output.dir, where the bench
// writes bench.json, bench.csv and (output.trace) trace.json. Sets config.run_id.
RunOutputsClaim check_bench_outputs(Config& config, int world_size);

// Rank 0, once the launch passed every start-up check (a resume: its checkpoint loaded) and before
// its first output file: removes taken_files (saying taken_note) and the `.partial` files a
// killed write of a trace or bench results left (regular files only), and writes run.json into
// output.dir and checkpoint_dir.
void claim_run_outputs(const Config& config, const RunOutputsClaim& claim, bool quiet);

// Rank 0, after claim_run_outputs (a bad checkpoint is refused before anything is removed):
// removes the checkpoints and points `latest` at the newest one left of this run.
void apply_checkpoint_removals(const Config& config, const RunOutputsClaim& claim, bool quiet);

}  // namespace zl
