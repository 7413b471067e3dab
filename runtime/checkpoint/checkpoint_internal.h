// What the single-file and the sharded checkpoint code share (runtime/checkpoint only): the run's
// facts as __metadata__, and a bucket's parameters restored from their fp32 values.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "runtime/train/training_state.h"

namespace zl {

// The step, sampler position, optimizer, mode, precision and config of `state`, as strings.
std::map<std::string, std::string> checkpoint_metadata(const TrainingState& state);

// Bucket b's parameters from their fp32 values (host, [b.numel], the bucket's elements; stage 3
// reads only this rank's shard of them): Note [Masters in checkpoints] in checkpoint.cpp.
void parameters_from_host(const TrainingState& state, const Bucket& b,
                          const std::vector<float>& host);

}  // namespace zl
