// Tape: the arena (aligned, non-overlapping, reused after reset, grows without moving live
// tensors) and backward (reverse order, observer around each node, nodes kept until reset).
#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "models/tape.h"

namespace zl {

TEST_CASE("tape arena: aligned, disjoint, same addresses after reset", "[models]") {
  Tape tape;
  const std::vector<std::pair<std::int64_t, std::int64_t>> shapes{{3, 5}, {1, 1},   {7, 13},
                                                                  {0, 4}, {64, 64}, {2, 17}};
  std::vector<Tensor> first;
  for (auto [r, c] : shapes) first.push_back(tape.alloc(r, c));

  for (std::size_t i = 0; i < first.size(); ++i) {
    const Tensor& t = first[i];
    CHECK(t.rows == shapes[i].first);
    CHECK(t.cols == shapes[i].second);
    CHECK(t.device == DeviceKind::Cpu);
    if (t.numel() == 0) continue;
    CHECK(reinterpret_cast<std::uintptr_t>(t.f32()) % 64 == 0);  // 16 floats
    for (std::size_t j = 0; j < i; ++j) {
      const Tensor& u = first[j];
      if (u.numel() == 0) continue;
      const bool disjoint = t.f32() + t.numel() <= u.f32() || u.f32() + u.numel() <= t.f32();
      CHECK(disjoint);
    }
  }
  // Contents are writable over the whole extent.
  for (const Tensor& t : first) {
    for (std::int64_t k = 0; k < t.numel(); ++k) t.f32()[k] = static_cast<float>(k);
  }

  tape.reset();
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const Tensor t = tape.alloc(shapes[i].first, shapes[i].second);
    if (t.numel() > 0) CHECK(t.f32() == first[i].f32());
  }
}

TEST_CASE("tape arena grows for large requests and keeps earlier tensors in place", "[models]") {
  Tape tape;
  Tensor small = tape.alloc(4, 4);
  small.f32()[0] = 42.0f;
  // Larger than any first chunk: forces a new chunk.
  Tensor big = tape.alloc(1 << 12, 1 << 10);
  big.f32()[big.numel() - 1] = 1.0f;
  Tensor after = tape.alloc(8, 8);
  CHECK(small.f32()[0] == 42.0f);
  CHECK(reinterpret_cast<std::uintptr_t>(big.f32()) % 64 == 0);
  CHECK(reinterpret_cast<std::uintptr_t>(after.f32()) % 64 == 0);

  // The same sequence after reset lands on the same addresses: no allocation in steady state.
  tape.reset();
  CHECK(tape.alloc(4, 4).f32() == small.f32());
  CHECK(tape.alloc(1 << 12, 1 << 10).f32() == big.f32());
  CHECK(tape.alloc(8, 8).f32() == after.f32());
}

TEST_CASE("tape backward runs nodes in reverse with the observer around each", "[models]") {
  Tape tape;
  std::vector<std::string> events;
  for (int i = 0; i < 3; ++i) {
    tape.record(TapeNode{"node", i, [&events, i](const BackwardContext& ctx) {
                           events.push_back("run " + std::to_string(i));
                           ctx.grad_ready(100 + i);
                         }});
  }
  tape.record(TapeNode{"no_op", 3, {}});  // a node without backward work is still observed
  CHECK(tape.size() == 4);
  tape.on_backward_node = [&](const TapeNode& n, bool begin) {
    events.push_back((begin ? "begin " : "end ") + std::to_string(n.layer));
  };
  std::vector<int> ready;
  const GradReadyHook hook = [&](int id) { ready.push_back(id); };
  tape.backward(BackwardContext{Accumulate::Overwrite, &hook});
  CHECK(events == std::vector<std::string>{"begin 3", "end 3", "begin 2", "run 2", "end 2",
                                           "begin 1", "run 1", "end 1", "begin 0", "run 0",
                                           "end 0"});
  CHECK(ready == std::vector<int>{102, 101, 100});

  // Nodes stay until reset (backward may run again); reset forgets them.
  CHECK(tape.size() == 4);
  tape.reset();
  CHECK(tape.size() == 0);
  events.clear();
  tape.backward(BackwardContext{});
  CHECK(events.empty());
}

TEST_CASE("backward context without a hook is a no-op", "[models]") {
  BackwardContext ctx;
  ctx.grad_ready(0);  // null hook pointer
  const GradReadyHook empty;
  ctx.on_grad_ready = &empty;
  ctx.grad_ready(0);  // empty std::function
  SUCCEED();
}

}  // namespace zl
