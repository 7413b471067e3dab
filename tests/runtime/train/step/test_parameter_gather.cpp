// ParameterGather (stage 3) on a loopback communicator: forward gathers the buckets in forward
// order, `prefetch` ahead, within mode.gather_buffers; a layer waits for its bucket's gather and
// then reads its shard's values; backward gathers only the buckets it reads; releases unbind;
// without reshard_after_forward nothing is gathered twice; gather_pass gathers each bucket once.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <future>

#include "base/errors.h"
#include "tests/runtime/train/step/loopback_step.h"

using namespace zl;
using namespace zl::test;

namespace {

using Kind = StepEvent::Kind;
using Issued = std::vector<std::string>;

// Four buckets: 0 = layers.3, 1 = layers.2, 2 = layers.1, 3 = layers.0 (not read in backward).
StepSetup stage3(int prefetch = 1, bool reshard = true) {
  return StepSetup{.mode = mode_named("zero3/after_backward/reduce_scatter_allgather"),
                   .prefetch = prefetch,
                   .reshard_after_forward = reshard,
                   .widths = {4, 16, 32, 8, 3}};
}

Issued gathers(const std::vector<int>& buckets) {
  Issued out;
  for (int b : buckets) out.push_back("all_gather_from " + std::to_string(b));
  return out;
}

// The most gather buffers in use at once, from the events.
int most_resident(const EventLog& events) {
  int now = 0, most = 0;
  for (const StepEvent& e : events.events()) {
    if (e.kind == Kind::GatherIssued) most = std::max(most, ++now);
    if (e.kind == Kind::GatherReleased) --now;
  }
  return most;
}

}  // namespace

TEST_CASE("forward gathers every bucket in forward order, prefetching within its buffers",
          "[parameter-gather]") {
  for (const int prefetch : {1, 2}) {
    LoopbackStep s(stage3(prefetch));
    INFO("prefetch " << prefetch);
    REQUIRE(s.buckets() == 4);
    s.forward();
    CHECK(s.issued("comm.broadcast") == gathers({3, 2, 1, 0}));
    // Bucket 3's first layer waits for it only after the next `prefetch` gathers were issued.
    for (int ahead = 1; ahead <= prefetch; ++ahead) {
      CHECK(s.events.index_of(Kind::GatherIssued, 3 - ahead) <
            s.events.index_of(Kind::GatherDone, 3));
    }
    CHECK(s.events.index_of(Kind::GatherIssued, 3 - prefetch - 1) >
          s.events.index_of(Kind::GatherDone, 3));
    CHECK(most_resident(s.events) == s.mode.gather_buffers(s.plan));
    s.backward(MicroBatch{});
    CHECK(s.after_backward().finite);
  }
}

TEST_CASE("a layer reads its shard's values once its gather completed; release unbinds",
          "[parameter-gather]") {
  LoopbackStep s(stage3());
  Hold hold = s.broadcast_comm.hold();
  auto first_layer = std::async(std::launch::async, [&] { s.forward_read(0); });
  CHECK(first_layer.wait_for(std::chrono::milliseconds(100)) == std::future_status::timeout);
  hold.open();
  first_layer.get();
  for (int id : {0, 1}) {  // layers.0, in bucket 3
    const ParameterInfo& p = s.store.info(id);
    const float* value = s.store.param_as<float>(id);
    REQUIRE(value != nullptr);
    for (std::int64_t i = 0; i < p.numel; ++i) {
      REQUIRE(value[i] == s.initial[static_cast<std::size_t>(p.offset + i)]);
    }
  }
  s.parts.gather().release_all();
  CHECK(s.store.param_as<float>(0) == nullptr);
  CHECK(s.events.buckets(Kind::GatherReleased) == std::vector<int>{2, 3});  // from bucket 0 up
}

TEST_CASE("backward gathers only the buckets it reads; bucket 0 stays from forward",
          "[parameter-gather]") {
  LoopbackStep s(stage3());
  REQUIRE_FALSE(s.plan.buckets[3].read_in_backward);
  CHECK(s.step().finite);
  CHECK(s.issued("comm.broadcast") == gathers({3, 2, 1, 0, 1, 2}));
  CHECK(s.events.buckets(Kind::GatherIssued) == std::vector<int>{3, 2, 1, 0, 1, 2});
  SECTION("a backward read of a bucket marked unread in backward is an InternalError") {
    s.forward();
    s.begin_backward(MicroBatch{});
    CHECK_THROWS_AS(s.parts.gather().before_backward_read(0), InternalError);
  }
}

TEST_CASE("without reshard_after_forward every bucket stays from forward to backward",
          "[parameter-gather]") {
  LoopbackStep s(stage3(1, false));
  CHECK(s.step().finite);
  CHECK(s.issued("comm.broadcast") == gathers({3, 2, 1, 0}));
  CHECK(most_resident(s.events) == s.mode.gather_buffers(s.plan));
  CHECK(s.mode.gather_buffers(s.plan) == 4);
}

TEST_CASE("the next micro-batch's forward gathers again what backward released",
          "[parameter-gather]") {
  StepSetup two_micro_batches = stage3();
  two_micro_batches.grad_accum = 2;  // the step's collective program has both micro-batches
  LoopbackStep s(two_micro_batches);
  s.forward();
  s.backward(MicroBatch{.index = 0, .count = 2});
  s.log.clear();
  s.forward();  // bucket 3 was released by backward (not read there): gathered again
  CHECK(s.issued("comm.broadcast") == gathers({3, 2, 1, 0}));
  s.backward(MicroBatch{.index = 1, .count = 2});
  CHECK(s.after_backward().finite);
}

TEST_CASE("gather_pass gathers and releases every bucket in forward order", "[parameter-gather]") {
  LoopbackStep s(stage3());
  s.parts.gather().gather_pass();
  CHECK(s.issued("comm.broadcast") == gathers({3, 2, 1, 0}));
  std::vector<StepEvent> want;
  for (int b : {3, 2, 1, 0}) {
    for (Kind k : {Kind::GatherIssued, Kind::GatherDone, Kind::GatherReleased}) {
      want.push_back({k, b});
    }
  }
  const std::vector<StepEvent> got = s.events.events();
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    CHECK(got[i].kind == want[i].kind);
    CHECK(got[i].bucket == want[i].bucket);
  }
  CHECK(s.store.param_as<float>(0) == nullptr);
}
