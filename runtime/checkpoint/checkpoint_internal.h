// What the single-file and the sharded checkpoint code share (runtime/checkpoint only; defined in
// checkpoint.cpp): the run's facts as __metadata__, a bucket's parameters restored from their fp32
// values, and where a run continues after a load.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "runtime/train/run/training_state.h"

namespace zl {

struct CheckpointFacts;  // runtime/checkpoint/files/checkpoint_files.h

// The step, sampler position, optimizer, mode, precision and config of `state`, as strings.
std::map<std::string, std::string> checkpoint_metadata(const TrainingState& state);

// Bucket b's parameters from their fp32 values (host, [b.numel], the bucket's elements; stage 3
// reads only this rank's shard of them): Note [Masters in checkpoints] in checkpoint.cpp.
void parameters_from_host(const TrainingState& state, const Bucket& b,
                          const std::vector<float>& host);

// After a load of `path` (either format), on every rank: the run continues at the checkpoint's
// step and sampler position (converted to this world's global batch) with its optimizer step.
// Rank 0 then says where (`extra` follows the world size in that line), whether the global batch
// or the sample order changed, and which results-affecting config keys differ from the
// checkpoint's (`metadata`: its __metadata__).
void resume_at(const TrainingState& state, const CheckpointFacts& facts, const std::string& path,
               const std::string& extra, const std::map<std::string, std::string>& metadata);

}  // namespace zl
