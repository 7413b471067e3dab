// The schedules on loopback communicators: when each bucket is stepped and broadcast relative to
// its collective (ddp, zero/none, zero/after_backward, zero/interleaved with its tail order), the
// next forward's per-layer wait, a skipped step stepping nothing, every mode issuing the order
// its collective program lists, and every mode stepping to ddp's parameters at one rank.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <future>

#include "tests/runtime/train/step/loopback_step.h"

using namespace zl;
using namespace zl::test;

namespace {

using Kind = StepEvent::Kind;
using Issued = std::vector<std::string>;

// Four buckets of distinct sizes (80, 544, 272, 48 elements from the last to the first).
const std::vector<std::int64_t> kFourBuckets = {4, 16, 32, 8, 3};

std::vector<int> in_order(int n) {
  std::vector<int> out;
  for (int b = 0; b < n; ++b) out.push_back(b);
  return out;
}

// Every bucket's collective completed before the first bucket was stepped.
void check_steps_after_every_collective(const LoopbackStep& s) {
  const std::vector<StepEvent> events = s.events.events();
  int last_done = -1, first_step = static_cast<int>(events.size());
  for (int i = 0; i < static_cast<int>(events.size()); ++i) {
    if (events[static_cast<std::size_t>(i)].kind == Kind::CollectiveDone) last_done = i;
    if (events[static_cast<std::size_t>(i)].kind == Kind::StepBegin && i < first_step) {
      first_step = i;
    }
  }
  CHECK(last_done < first_step);
}

}  // namespace

TEST_CASE("ddp steps every bucket after every collective and broadcasts nothing", "[schedule]") {
  LoopbackStep s({.mode = mode_named("ddp")});
  CHECK(s.step().finite);
  check_steps_after_every_collective(s);
  CHECK(s.events.buckets(Kind::StepBegin) == in_order(3));
  CHECK(s.issued("comm.broadcast").empty());
  CHECK(s.issued("comm.reduce") == Issued{"all_reduce 0", "all_reduce 1", "all_reduce 2"});
}

TEST_CASE("zero/none steps every bucket, then broadcasts all and waits for them", "[schedule]") {
  LoopbackStep s({.mode = mode_named("zero/none/reduce_broadcast")});
  CHECK(s.step().finite);
  check_steps_after_every_collective(s);
  CHECK(s.events.buckets(Kind::StepBegin) == in_order(3));
  CHECK(s.events.buckets(Kind::BroadcastStarted) == in_order(3));
  CHECK(s.events.index_of(Kind::StepEnd, 2) < s.events.index_of(Kind::BroadcastStarted, 0));
  CHECK(s.issued("comm.broadcast") ==
        Issued{"broadcast 0", "broadcast 1", "broadcast 2"});
  for (const LoggedCollective& e : s.log.entries()) CHECK(e.done);  // waited for on return
}

TEST_CASE("zero/after_backward steps and broadcasts bucket by bucket; forward waits per layer",
          "[schedule]") {
  LoopbackStep s({.mode = mode_named("zero/after_backward/reduce_broadcast")});
  Hold broadcasts = s.broadcast_comm.hold();
  CHECK(s.step().finite);
  for (int b = 0; b < 3; ++b) {
    INFO("bucket " << b);
    CHECK(s.events.index_of(Kind::CollectiveDone, b) < s.events.index_of(Kind::StepBegin, b));
    CHECK(s.events.index_of(Kind::StepEnd, b) < s.events.index_of(Kind::BroadcastStarted, b));
    if (b + 1 < 3) {
      CHECK(s.events.index_of(Kind::BroadcastStarted, b) <
            s.events.index_of(Kind::StepBegin, b + 1));
    }
  }
  CHECK(s.issued("comm.broadcast") ==
        Issued{"broadcast 0", "broadcast 1", "broadcast 2"});
  // The broadcasts are held: the next forward's first layer (the last bucket) waits for its one.
  auto first_layer = std::async(std::launch::async, [&] { s.forward_read(0); });
  CHECK(first_layer.wait_for(std::chrono::milliseconds(100)) == std::future_status::timeout);
  broadcasts.open();
  first_layer.get();
}

TEST_CASE("zero/interleaved steps a bucket behind its collective during backward, the tail last "
          "bucket first", "[schedule]") {
  LoopbackStep s(
      {.mode = mode_named("zero/interleaved/reduce_broadcast"), .widths = kFourBuckets});
  REQUIRE(s.buckets() == 4);
  s.forward();
  s.begin_backward(MicroBatch{});
  for (int id : s.plan.buckets[0].param_ids) s.backward_param(id);
  s.reduce_comm.synchronize();  // bucket 0's continuation ran, while backward is not done
  CHECK(s.events.buckets(Kind::StepBegin) == std::vector<int>{0});
  CHECK(s.issued("comm.broadcast") == Issued{"broadcast 0"});
  for (int b = 1; b < 4; ++b) {
    for (int id : s.plan.buckets[static_cast<std::size_t>(b)].param_ids) s.backward_param(id);
  }
  s.end_backward();
  CHECK(s.after_backward().finite);
  s.synchronize();  // the steps are issued on return, the last ones maybe still running
  // The last bucket is stepped and broadcast before the second-last (Note [Tail broadcast order]).
  CHECK(s.events.buckets(Kind::StepBegin) == std::vector<int>{0, 1, 3, 2});
  CHECK(s.issued("comm.broadcast") ==
        Issued{"broadcast 0", "broadcast 1", "broadcast 3", "broadcast 2"});
  for (int b = 0; b < 4; ++b) {
    CHECK(s.events.index_of(Kind::CollectiveDone, b) < s.events.index_of(Kind::StepBegin, b));
  }
}

TEST_CASE("element shards reduce-scatter, step the shard and all-gather", "[schedule]") {
  LoopbackStep s({.mode = mode_named("zero/after_backward/reduce_scatter_allgather")});
  CHECK(s.step().finite);
  CHECK(s.issued("comm.broadcast") ==
        Issued{"all_gather 0", "all_gather 1", "all_gather 2"});
  CHECK(s.events.buckets(Kind::StepBegin) == in_order(3));
}

TEST_CASE("a skipped step steps and broadcasts nothing", "[schedule]") {
  for (const char* name : {"ddp", "zero/none/reduce_broadcast",
                           "zero/after_backward/reduce_broadcast",
                           "zero2/after_backward/reduce_scatter_allgather"}) {
    LoopbackStep s({.mode = mode_named(name), .on_nonfinite = OnNonfinite::SkipStep});
    INFO(s.mode.name());
    const std::vector<float> before = s.parameters();
    s.poison_gradient(s.plan.buckets[1].param_ids.front());
    CHECK_FALSE(s.step().finite);
    CHECK(s.events.buckets(Kind::StepBegin).empty());
    CHECK(s.events.buckets(Kind::BroadcastStarted).empty());
    const std::vector<float> after = s.parameters();
    CHECK(std::memcmp(before.data(), after.data(), before.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("every mode issues the collectives its collective program lists, in order",
          "[schedule]") {
  for (const char* name : {"ddp", "zero/none/reduce_broadcast",
                           "zero/after_backward/allreduce_broadcast",
                           "zero/interleaved/reduce_broadcast",
                           "zero/interleaved/reduce_scatter_allgather",
                           "zero2/after_backward/reduce_scatter_allgather",
                           "zero3/none/reduce_scatter_allgather",
                           "zero3/after_backward/reduce_scatter_allgather"}) {
    const Mode mode = mode_named(name);
    for (const std::int64_t accum : {1, 3}) {
      for (const bool reshard : {true, false}) {
        if (!reshard && mode.stage < 3) continue;
        LoopbackStep s({.mode = mode, .grad_accum = accum, .reshard_after_forward = reshard,
                        .widths = kFourBuckets});
        INFO(s.mode.name() << " grad_accum " << accum << " reshard_after_forward " << reshard);
        s.step();
        s.synchronize();
        Issued planned_reduce, planned_broadcast;
        for (const ProgramEntry& c : collective_program(s.mode, s.plan)) {
          const bool gradients = c.comm == CommRole::Reduce;
          const std::string op = c.op == CollectiveOp::AllGather && s.mode.gathers_parameters()
                                     ? "all_gather_from"
                                     : collective_name(c.op);
          (gradients ? planned_reduce : planned_broadcast)
              .push_back(op + " " + std::to_string(c.bucket));
        }
        CHECK(s.issued("comm.reduce") == planned_reduce);
        CHECK(s.issued("comm.broadcast") == planned_broadcast);
      }
    }
  }
}

TEST_CASE("every mode steps to ddp's parameters at one rank", "[schedule]") {
  const auto train = [](const Mode& mode, std::int64_t accum) {
    LoopbackStep s({.mode = mode, .grad_accum = accum, .widths = kFourBuckets});
    for (int i = 0; i < 2; ++i) REQUIRE(s.step().finite);
    return s.parameters();
  };
  for (const std::int64_t accum : {1, 3}) {
    const std::vector<float> want = train(mode_named("ddp"), accum);
    for (const char* name :
         {"zero/none/reduce_broadcast", "zero/after_backward/reduce_broadcast",
          "zero/interleaved/reduce_broadcast", "zero/interleaved/reduce_scatter_allgather",
          "zero2/interleaved/reduce_scatter_allgather",
          "zero3/after_backward/reduce_scatter_allgather"}) {
      INFO(name << " grad_accum " << accum);
      const std::vector<float> got = train(mode_named(name), accum);
      REQUIRE(got.size() == want.size());
      CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
    }
  }
}
