// The guard that keeps one run from overwriting another's outputs (docs/checkpoints.md, "Runs
// never overwrite each other"): before `zerolap train` writes anything, the files already in
// output.dir and checkpoint.dir are checked against the run about to start.
#pragma once

#include <string>

#include "runtime/config/config.h"

namespace zl {

// Rank 0, before the run writes its first file. Throws UserError (exit 2) naming the files, what
// differs and the choices when the run would replace or remove outputs of a different run:
//  - output.dir's metrics.csv, config.toml, trace.json, unless its config.toml has the same
//    results-affecting keys (key_affects_results: the same command again), or the run resumes
//    from the newest checkpoint (it continues those outputs), or output.overwrite = true;
//  - checkpoint.dir's checkpoints after the step the run starts from, unless their metadata has
//    the same results-affecting config and world size, or checkpoint.overwrite = true (then those
//    of the other run are removed now, so pruning and `latest` follow this run alone).
// A resume from an earlier checkpoint than the newest says what happens to the later ones.
void check_run_outputs(const Config& config, int world_size, bool quiet);

// Rank 0 of `zerolap bench`, before it measures: the same rule for output.dir's bench.json and
// bench.csv. They are this bench's own when bench.json records the same results-affecting config
// and world size (the same command again); otherwise exit 2 naming them and the choices, unless
// output.overwrite = true.
void check_bench_outputs(const Config& config, int world_size, bool quiet);

// "section.key" of each results-affecting key (key_affects_results) whose value differs between
// two to_toml texts.
std::vector<std::string> result_differences(const std::string& a_toml, const std::string& b_toml);

}  // namespace zl
