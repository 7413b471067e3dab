// Tape: the recorded forward and its activation arena. The arena is a list of DeviceBuffer chunks
// on exec().device, filled front to back and rewound by reset(); a step that repeats the previous
// step's allocation sequence (same model, same batch size) reuses exactly the same memory and
// allocates nothing. Every allocation starts on a kArenaAlignBytes boundary (CUDA float4 loads),
// fp32 and bf16 tensors alike; the chunks are fp32 DeviceBuffers used as raw bytes.
#include "models/tape.h"

#include <algorithm>

#include "base/errors.h"

namespace zl {
namespace {

constexpr std::int64_t kArenaAlignBytes = 64;       // as ParameterStore::kAlignFloats fp32 elements
constexpr std::int64_t kMinChunkBytes = 1 << 20;    // 1 MiB: few cudaMallocs for small models

std::int64_t round_up(std::int64_t n, std::int64_t multiple) {
  return (n + multiple - 1) / multiple * multiple;
}

}  // namespace

void Tape::reset() {
  nodes_.clear();
  arena_chunk_ = 0;
  arena_used_ = 0;
}

Tensor Tape::alloc(std::int64_t rows, std::int64_t cols, DType dtype) {
  ZL_CHECK(rows >= 0 && cols >= 0, "Tape::alloc({}, {})", rows, cols);
  const std::int64_t n = round_up(rows * cols * dtype_size(dtype), kArenaAlignBytes);
  if (n == 0) return Tensor{nullptr, rows, cols, exec_.device, dtype};
  // First fit from the current chunk on; the tail of a chunk that is too small stays unused until
  // the next reset. The walk depends only on the sequence of sizes, so a repeated sequence lands
  // on the same addresses.
  while (arena_chunk_ < arena_.size() && arena_used_ + n > arena_[arena_chunk_].bytes()) {
    ++arena_chunk_;
    arena_used_ = 0;
  }
  if (arena_chunk_ == arena_.size()) {
    // Grow geometrically (at least doubling the capacity) so a step needs O(log) chunks.
    std::int64_t capacity = 0;
    for (const DeviceBuffer& chunk : arena_) capacity += chunk.bytes();
    const std::int64_t bytes = round_up(std::max({n, capacity, kMinChunkBytes}), kArenaAlignBytes);
    arena_.emplace_back(exec_.device, bytes / dtype_size(DType::F32));
    arena_used_ = 0;
  }
  char* data = static_cast<char*>(arena_[arena_chunk_].raw()) + arena_used_;
  arena_used_ += n;
  return Tensor{data, rows, cols, exec_.device, dtype};
}

void Tape::backward(const BackwardContext& ctx) {
  for (auto it = nodes_.rbegin(); it != nodes_.rend(); ++it) {
    if (it->reads_param >= 0 && ctx.before_read && *ctx.before_read) {
      (*ctx.before_read)(it->reads_param);
    }
    if (on_backward_node) on_backward_node(*it, true);
    // A node without a backward (e.g. a residual add, whose gradient slots alias) only marks
    // its place in traces.
    if (it->backward) it->backward(ctx);
    if (on_backward_node) on_backward_node(*it, false);
  }
}

}  // namespace zl
