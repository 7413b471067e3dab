// What the single-file and the sharded checkpoint code share (runtime/checkpoint only): the run's
// facts as __metadata__, and a bucket's parameters restored from their fp32 values.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "runtime/train/run/training_state.h"

namespace zl {

struct CheckpointFacts;  // runtime/checkpoint/checkpoint.h

// The step, sampler position, optimizer, mode, precision and config of `state`, as strings.
std::map<std::string, std::string> checkpoint_metadata(const TrainingState& state);

// Bucket b's parameters from their fp32 values (host, [b.numel], the bucket's elements; stage 3
// reads only this rank's shard of them): Note [Masters in checkpoints] in checkpoint.cpp.
void parameters_from_host(const TrainingState& state, const Bucket& b,
                          const std::vector<float>& host);

// Writes `text` to `path` and fsyncs it; on failure removes it and throws RuntimeFailure naming it
// ("disk full?"). `what` names the file in an open error. The caller renames it into place.
void write_file_durably(const std::filesystem::path& path, const std::string& text,
                        const char* what);

// After a load of `path` (either format), on every rank: the run continues at the checkpoint's
// step and sampler position (converted to this world's global batch) with its optimizer step.
// Rank 0 then says where (`extra` follows the world size in that line), whether the global batch
// or the sample order changed, and which results-affecting config keys differ from the
// checkpoint's (`metadata`: its __metadata__).
void resume_at(const TrainingState& state, const CheckpointFacts& facts, const std::string& path,
               const std::string& extra, const std::map<std::string, std::string>& metadata);

}  // namespace zl
