// Tape: the recorded forward and its activation arena. The arena is a list of DeviceBuffer chunks
// on exec().device, filled front to back and rewound by reset(); a step that repeats the previous
// step's allocation sequence (same model, same batch size) reuses exactly the same memory and
// allocates nothing. Every allocation starts on a kArenaAlignFloats boundary (CUDA float4 loads).
#include "models/tape.h"

#include <algorithm>

#include "base/errors.h"

namespace zl {
namespace {

constexpr std::int64_t kArenaAlignFloats = 16;     // 64 bytes, as ParameterStore::kAlignFloats
constexpr std::int64_t kMinChunkFloats = 1 << 18;  // 1 MiB: few cudaMallocs for small models

std::int64_t round_up(std::int64_t n, std::int64_t multiple) {
  return (n + multiple - 1) / multiple * multiple;
}

}  // namespace

void Tape::reset() {
  nodes_.clear();
  arena_chunk_ = 0;
  arena_used_ = 0;
}

Tensor Tape::alloc(std::int64_t rows, std::int64_t cols) {
  ZL_CHECK(rows >= 0 && cols >= 0, "Tape::alloc({}, {})", rows, cols);
  const std::int64_t n = round_up(rows * cols, kArenaAlignFloats);
  if (n == 0) return Tensor{nullptr, rows, cols, exec_.device};
  // First fit from the current chunk on; the tail of a chunk that is too small stays unused until
  // the next reset. The walk depends only on the sequence of sizes, so a repeated sequence lands
  // on the same addresses.
  while (arena_chunk_ < arena_.size() && arena_used_ + n > arena_[arena_chunk_].size()) {
    ++arena_chunk_;
    arena_used_ = 0;
  }
  if (arena_chunk_ == arena_.size()) {
    // Grow geometrically (at least doubling the capacity) so a step needs O(log) chunks.
    std::int64_t capacity = 0;
    for (const DeviceBuffer& chunk : arena_) capacity += chunk.size();
    const std::int64_t size = round_up(std::max({n, capacity, kMinChunkFloats}), kArenaAlignFloats);
    arena_.emplace_back(exec_.device, size);
    arena_used_ = 0;
  }
  float* data = arena_[arena_chunk_].data() + arena_used_;
  arena_used_ += n;
  return Tensor{data, rows, cols, exec_.device};
}

void Tape::backward(const BackwardContext& ctx) {
  for (auto it = nodes_.rbegin(); it != nodes_.rend(); ++it) {
    if (on_backward_node) on_backward_node(*it, true);
    // A node without a backward (e.g. a residual add, whose gradient slots alias) only marks
    // its place in traces.
    if (it->backward) it->backward(ctx);
    if (on_backward_node) on_backward_node(*it, false);
  }
}

}  // namespace zl
