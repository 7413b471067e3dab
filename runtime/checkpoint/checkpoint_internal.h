// What the single-file and the sharded checkpoint code share (runtime/checkpoint only; defined in
// checkpoint.cpp): the run's facts as __metadata__, the finite check of what is written, a
// bucket's parameters restored from their fp32 values (masters or not) and its state from host
// staging, a bucket's elements as runs of parameters, and where a run continues after a load.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/train/run/training_state.h"

namespace zl {

struct CheckpointFacts;  // runtime/checkpoint/files/checkpoint_files.h

// The step, sampler position, optimizer, mode, precision and config of `state`, as strings.
std::map<std::string, std::string> checkpoint_metadata(const TrainingState& state);

// A checkpoint is never written from non-finite values (docs/design.md, "Divergence"): each
// tensor is checked in the host memory it is written from, so the check costs no extra pass over
// device memory and no message. values[0, n) are the tensor's elements [first, first + n):
// RuntimeFailure naming the step, the tensor, the element and what `latest` still names.
void require_finite(const float* values, std::int64_t first, std::int64_t n,
                    const std::string& tensor, const TrainingState& state);
// Where the first non-finite value of values[0, n) is, or -1. A branch-free pass over blocks that
// the compiler vectorizes (the check reads every byte of a checkpoint, in the stop of an async
// one), then a scalar search of the block that holds one.
std::int64_t first_nonfinite(const float* values, std::int64_t n);

// Whether the parameter tensors come from the masters of the ranks that step each bucket (bf16)
// rather than from rank 0's parameters (Note [Masters in checkpoints]). The same on every rank.
// ZeRO stage 3 has no flat parameters either: its fp32 parameter shards are gathered as masters
// are (RankOptimizer::read_master_range reads the shard), so the file holds the same tensors.
bool masters_in_file(const TrainingState& state);

// Bucket b's parameters from their fp32 values (host, [b.numel], the bucket's elements; stage 3
// reads only this rank's shard of them): Note [Masters in checkpoints] in checkpoint.cpp.
void parameters_from_host(const TrainingState& state, const Bucket& b,
                          const std::vector<float>& host);
// The state of the elements of bucket b this rank steps (stepped(b): the whole bucket, or its
// shard) from the bucket's staging `host`, laid out [state][b.numel].
void state_from_host(const TrainingState& state, const Bucket& b, const std::vector<float>& host);

// Elements [r.offset, +r.numel) of bucket b's flat buffer, as fn(id, lo, hi): elements [lo, hi)
// of parameter `id` (the padding around parameters is not in any file).
template <class Fn>
void for_each_param_run(const ParameterStore& store, const Bucket& b, const ElementRange& r,
                        Fn fn) {
  for (const int id : b.param_ids) {
    const ParameterInfo& p = store.info(id);
    const std::int64_t lo = std::max(r.offset, p.offset);
    const std::int64_t hi = std::min(r.offset + r.numel, p.offset + p.numel);
    if (hi > lo) fn(id, lo - p.offset, hi - p.offset);
  }
}

// After a load of `path` (either format), on every rank: the run continues at the checkpoint's
// step and sampler position (converted to this world's global batch) with its optimizer step.
// Rank 0 then says where (`extra` follows the world size in that line), whether the global batch
// or the sample order changed, and which results-affecting config keys differ from the
// checkpoint's (`metadata`: its __metadata__).
void resume_at(const TrainingState& state, const CheckpointFacts& facts, const std::string& path,
               const std::string& extra, const std::map<std::string, std::string>& metadata);

}  // namespace zl
