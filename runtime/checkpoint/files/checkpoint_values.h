// What the values a checkpoint carries may be, whatever file format carries them: every loader
// calls these on what it reads, before any rank trains on it. Parameters and optimizer state are
// finite, a second moment (exp_avg_sq) is never negative, and the run's facts (step, sampler
// position, global batch, epoch size, world size) mean what they say. A value that breaks one is
// bad input: a UserError (exit 2) naming the file and the tensor or metadata key.
#pragma once

#include <cstdint>
#include <string>

namespace zl {

struct CheckpointFacts;  // runtime/checkpoint/files/checkpoint_files.h

// The run's facts of a checkpoint `file` (read from its metadata): each count at most 2^53 (a run
// never reaches more), optimizer_step <= step, global_batch, batches_per_epoch and world_size at
// least 1, world_size at most kMaxWorldSize, global_batch a multiple of world_size (it is
// data.batch_size x world_size) and an epoch of at most 2^53 samples.
void check_checkpoint_facts(const std::string& file, const CheckpointFacts& facts);

// Elements [first, first + n) of tensor `tensor` of checkpoint `file`, named as zerolap writes
// them (a parameter by its name, optimizer state as "optimizer.<param>.<state>"): every value
// finite, and those of an "exp_avg_sq" state >= 0. A loader may call it once per tensor or once
// per chunk of one; the message names the first bad element.
void check_checkpoint_values(const std::string& file, const std::string& tensor,
                             const float* values, std::int64_t n, std::int64_t first = 0);

}  // namespace zl
