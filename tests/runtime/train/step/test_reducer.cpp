// Reducer on a loopback communicator: bucket collectives start in index order whatever order
// backward finishes the buckets, take each mode's op and wire dtype, run only in the reducing
// backwards of gradient accumulation, and a bucket's Work completes only after its collective.
#include <catch2/catch.hpp>

#include <chrono>
#include <future>

#include "base/errors.h"
#include "tests/runtime/train/step/loopback_step.h"

using namespace zl;
using namespace zl::test;

namespace {

std::vector<int> ids_of_bucket(const LoopbackStep& s, int bucket) {
  return s.plan.buckets[static_cast<std::size_t>(bucket)].param_ids;
}

using Issued = std::vector<std::string>;

}  // namespace

TEST_CASE("bucket collectives start in bucket order when backward finishes the last bucket first",
          "[reducer]") {
  LoopbackStep s({.mode = mode_named("ddp")});
  REQUIRE(s.buckets() == 3);
  s.begin_backward(MicroBatch{});
  for (int b : {2, 1}) {
    for (int id : ids_of_bucket(s, b)) s.backward_param(id);
  }
  CHECK(s.issued("comm.reduce").empty());  // bucket 0 is not final yet
  for (int id : ids_of_bucket(s, 0)) s.backward_param(id);
  s.end_backward();
  CHECK(s.issued("comm.reduce") ==
        Issued{"all_reduce 0", "all_reduce 1", "all_reduce 2"});
  s.after_backward();
}

TEST_CASE("each mode's bucket collective: op, root, dtype and buffer", "[reducer]") {
  struct Case {
    const char* mode;
    DType reduce_dtype;
    const char* op;
    int root;
  };
  for (const Case& c : {Case{"ddp", DType::F32, "all_reduce", -1},
                        Case{"ddp", DType::BF16, "all_reduce", -1},
                        Case{"zero/none/allreduce_broadcast", DType::F32, "all_reduce", -1},
                        Case{"zero/after_backward/reduce_broadcast", DType::F32, "reduce", 0},
                        Case{"zero/none/reduce_scatter_allgather", DType::F32,
                             "reduce_scatter", -1},
                        Case{"zero2/none/reduce_scatter_allgather", DType::BF16,
                             "reduce_scatter", -1}}) {
    LoopbackStep s({.mode = mode_named(c.mode), .reduce_dtype = c.reduce_dtype});
    INFO(s.mode.name() << " reduce_dtype " << dtype_name(c.reduce_dtype));
    s.step();
    const std::vector<LoggedCollective> log = s.log.entries();
    int bucket = 0;
    for (const LoggedCollective& e : log) {
      if (e.comm != "comm.reduce" || e.op == "all_reduce_f64") continue;
      CHECK(e.op == c.op);
      CHECK(e.root == c.root);
      CHECK(e.dtype == c.reduce_dtype);
      CHECK(s.bucket_of(e) == bucket);
      const Bucket& b = s.plan.buckets[static_cast<std::size_t>(bucket)];
      if (c.reduce_dtype == DType::F32 && s.mode.mode.stage < 2) {
        CHECK(e.buf == s.store.grad() + b.offset);  // in place on the gradients
      } else if (s.store.grad() != nullptr) {  // a bf16 wire: the cast's buffer
        CHECK(e.buf != static_cast<const void*>(s.store.grad() + b.offset));
      } else {  // stage 2: a pool buffer (the store has no gradient buffer to offset into)
        CHECK(e.buf != nullptr);
      }
      ++bucket;
    }
    CHECK(bucket == s.buckets());
  }
}

TEST_CASE("gradient accumulation: earlier micro-batches add locally, the last one reduces",
          "[reducer]") {
  LoopbackStep s({.mode = mode_named("ddp"), .grad_accum = 3});
  for (std::int64_t m = 0; m < 3; ++m) {
    const MicroBatch micro{.index = m, .count = 3};
    CHECK(s.parts.reducer.backward_accumulate(micro) ==
          (m == 0 ? Accumulate::Overwrite : Accumulate::Add));
    s.forward();
    s.backward(micro);
    CHECK(s.parts.reducer.in_final_backward() == false);  // ended
    CHECK(s.issued("comm.reduce").size() == (m < 2 ? 0u : 3u));
  }
  // The collective ran on the sum of the three micro-batches' gradients.
  s.parts.reducer.wait_collectives(s.compute());
  for (const ParameterInfo& p : s.store.parameters()) {
    const int id = s.store.find(p.name);
    for (std::int64_t i = 0; i < p.numel; ++i) {
      float want = test_gradient(id, i, 0, 0);
      want += test_gradient(id, i, 1, 0);
      want += test_gradient(id, i, 2, 0);
      REQUIRE(s.store.param_grad(id)[i] == want);
    }
  }
  s.after_backward();
}

TEST_CASE("stage 2 reduce-scatters every micro-batch and always overwrites its pool buffers",
          "[reducer]") {
  LoopbackStep s({.mode = mode_named("zero2/none/reduce_scatter_allgather"), .grad_accum = 3});
  for (std::int64_t m = 0; m < 3; ++m) {
    const MicroBatch micro{.index = m, .count = 3};
    CHECK(s.parts.reducer.backward_accumulate(micro) == Accumulate::Overwrite);
    s.forward();
    s.backward(micro);
    CHECK(s.issued("comm.reduce").size() == static_cast<std::size_t>(3 * (m + 1)));
  }
  s.after_backward();
}

TEST_CASE("a bucket's Work completes after its collective ran, in issue order", "[reducer]") {
  LoopbackStep s({.mode = mode_named("ddp")});
  Hold hold = s.reduce_comm.hold();
  s.forward();
  s.backward(MicroBatch{});
  REQUIRE(s.issued("comm.reduce").size() == 3);
  for (int b = 0; b < 3; ++b) CHECK_FALSE(s.parts.reducer.collective(b).is_done());
  auto waited = std::async(std::launch::async,
                           [&] { s.parts.reducer.wait_collectives(s.compute()); });
  CHECK(waited.wait_for(std::chrono::milliseconds(100)) == std::future_status::timeout);
  hold.open();
  waited.get();
  for (int b = 0; b < 3; ++b) CHECK(s.parts.reducer.collective(b).is_done());
  for (const LoggedCollective& e : s.log.entries()) CHECK(e.done);
  CHECK(s.log.completion_order() == std::vector<std::size_t>{0, 1, 2});
  s.after_backward();
}

TEST_CASE("a missing or repeated gradient is an InternalError", "[reducer]") {
  LoopbackStep s({.mode = mode_named("ddp")});
  s.begin_backward(MicroBatch{});
  const std::vector<int> order = s.store.ids_in_layout_order();
  SECTION("missing") {
    for (std::size_t i = 0; i + 1 < order.size(); ++i) s.backward_param(order[i]);
    CHECK_THROWS_AS(s.parts.reducer.end_backward(), InternalError);
  }
  SECTION("repeated after its bucket was complete") {
    for (int id : ids_of_bucket(s, 0)) s.parts.reducer.gradient_ready(id);
    CHECK_THROWS_AS(s.parts.reducer.gradient_ready(order[0]), InternalError);
  }
}
