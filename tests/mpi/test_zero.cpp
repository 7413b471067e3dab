// ZeRO specifics: optimizer-state sharding bounds, where the steps run relative to the collectives
// (event order), gradient accumulation and clipping equivalence.
#include <catch2/catch.hpp>

#include <algorithm>
#include <mutex>
#include <utility>

#include "mpi_test_util.h"

using namespace zl;
using namespace zl::test;

namespace {

constexpr double kRtol = 1e-5;
constexpr double kAtol = 1e-6;

std::vector<std::string> zero(const char* overlap, const char* collective) {
  return {"parallel.mode=zero", std::string("parallel.overlap=") + overlap,
          std::string("parallel.collective=") + collective};
}

std::vector<float> train(const std::vector<std::string>& overrides, int steps) {
  Trainer trainer(small_config(overrides), world_of(MPI_COMM_WORLD), quiet_options());
  return train_checking_identity(trainer, steps);
}

// Records a step's events in the order they happen (main thread and comm threads).
class EventLog final : public StepObserver {
 public:
  void on_step_event(const StepEvent& event) override {
    std::lock_guard lock(mutex_);
    events_.push_back(event);
  }
  std::vector<StepEvent> take() {
    std::lock_guard lock(mutex_);
    return std::exchange(events_, {});
  }

 private:
  std::mutex mutex_;
  std::vector<StepEvent> events_;
};

// Index of the first event matching (kind, bucket), or -1.
long find_event(const std::vector<StepEvent>& events, StepEvent::Kind kind, int bucket) {
  for (std::size_t i = 0; i < events.size(); ++i) {
    if (events[i].kind == kind && events[i].bucket == bucket) return static_cast<long>(i);
  }
  return -1;
}

}  // namespace

TEST_CASE("optimizer state per rank is at most total / world + one bucket", "[zero]") {
  const World world = world_of(MPI_COMM_WORLD);
  for (const char* assignment : {"round_robin", "greedy"}) {
    for (const char* cap : {"1e-7", "0.002", "25"}) {
      const auto overrides = with(zero("none", "allreduce_broadcast"),
                                  {std::string("parallel.assignment=") + assignment,
                                   std::string("parallel.bucket_cap_mb=") + cap,
                                   std::string("parallel.first_bucket_cap_mb=") + cap});
      INFO(assignment << " cap " << cap);
      Trainer trainer(small_config(overrides), world, quiet_options());
      const std::int64_t total = trainer.model().store().total_numel() * 2 * 4;  // Adam: m and v
      const std::int64_t largest = trainer.plan().largest_bucket_numel() * 2 * 4;
      const std::int64_t mine = trainer.optimizer().state_bytes();
      CHECK(mine <= total / world.size + largest);
      std::int64_t sum = 0;
      MPI_Allreduce(&mine, &sum, 1, MPI_INT64_T, MPI_SUM, world.comm);
      CHECK(sum == total);  // every bucket's state lives on exactly one rank
    }
  }
}

TEST_CASE("interleaved steps a bucket before a later bucket's collective completes; none steps "
          "after the whole backward",
          "[zero][events]") {
  const World world = world_of(MPI_COMM_WORLD);
  const std::vector<std::string> one_layer_per_bucket = {"parallel.bucket_cap_mb=1e-7",
                                                         "parallel.first_bucket_cap_mb=1e-7"};
  SECTION("interleaved") {
    Trainer trainer(small_config(with(zero("interleaved", "allreduce_broadcast"), one_layer_per_bucket)),
                    world, quiet_options());
    EventLog log;
    trainer.set_step_observer(&log);
    trainer.train_step();
    trainer.synchronize();
    const auto events = log.take();
    const int buckets = static_cast<int>(trainer.plan().buckets.size());
    bool early_step = false;
    for (int b = 0; b + 1 < buckets; ++b) {
      const long step = find_event(events, StepEvent::Kind::StepBegin, b);
      const long later_done = find_event(events, StepEvent::Kind::CollectiveDone, buckets - 1);
      const long later_launch = find_event(events, StepEvent::Kind::CollectiveStarted, buckets - 1);
      REQUIRE(later_done >= 0);
      if (step >= 0 && step < later_done) early_step = true;
      // The step of b never runs before b's own collective completed.
      if (step >= 0) CHECK(find_event(events, StepEvent::Kind::CollectiveDone, b) < step);
      (void)later_launch;
    }
    int any = early_step ? 1 : 0, all_any = 0;
    MPI_Allreduce(&any, &all_any, 1, MPI_INT, MPI_MAX, world.comm);
    CHECK(all_any == 1);  // on at least one rank (a rank owning an early bucket)
    // Note [Tail broadcast order]. The last bucket is broadcast first, then the second-to-last,
    // whose step (3+ buckets) follows the last bucket's collective.
    REQUIRE(buckets >= 3);
    const long last_broadcast = find_event(events, StepEvent::Kind::BroadcastStarted, buckets - 1);
    const long second_last_broadcast =
        find_event(events, StepEvent::Kind::BroadcastStarted, buckets - 2);
    REQUIRE(last_broadcast >= 0);
    CHECK(last_broadcast < second_last_broadcast);
    const long second_last_step = find_event(events, StepEvent::Kind::StepBegin, buckets - 2);
    if (second_last_step >= 0) {
      CHECK(find_event(events, StepEvent::Kind::CollectiveDone, buckets - 1) < second_last_step);
    }
  }
  SECTION("none") {
    Trainer trainer(small_config(with(zero("none", "reduce_broadcast"), one_layer_per_bucket)),
                    world, quiet_options());
    EventLog log;
    trainer.set_step_observer(&log);
    trainer.train_step();
    trainer.synchronize();
    const auto events = log.take();
    long last_collective = -1, first_step = static_cast<long>(events.size());
    for (std::size_t i = 0; i < events.size(); ++i) {
      const auto k = events[i].kind;
      if (k == StepEvent::Kind::CollectiveStarted || k == StepEvent::Kind::CollectiveDone) {
        last_collective = static_cast<long>(i);
      }
      if (k == StepEvent::Kind::StepBegin) first_step = std::min(first_step, static_cast<long>(i));
    }
    CHECK(last_collective < first_step);
  }
}

TEST_CASE("gradient accumulation equals the same global batch in one step, in every mode",
          "[zero][accum]") {
  for (const auto& mode : mode_overrides([](const Mode&) { return true; })) {
    const auto one_step =
        train(with(mode, {"data.batch_size=8", "train.grad_accum=1", "parallel.bucket_cap_mb=0.002"}), 10);
    const auto accumulated =
        train(with(mode, {"data.batch_size=4", "train.grad_accum=2", "parallel.bucket_cap_mb=0.002"}), 10);
    INFO(describe(mode));
    CHECK(tolerance_ratio(accumulated, one_step, kRtol, kAtol) <= 1.0);
  }
}

TEST_CASE("with grad_accum not dividing an epoch, a step never straddles two epochs",
          "[zero][accum]") {
  // 10 micro-batches of 8 per rank and epoch, grad_accum 3: 3 steps an epoch, the 10th
  // micro-batch is skipped (Note [Epochs and accumulation] in runtime/train/run/trainer.h). 7 steps cross two
  // epoch boundaries and must still equal batches of 24 (3 an epoch) step for step.
  const World world = world_of(MPI_COMM_WORLD);
  const std::string samples = "data.train_samples=" + std::to_string(80 * world.size);
  for (const auto& mode : {std::vector<std::string>{"parallel.mode=ddp"},
                           zero("interleaved", "reduce_broadcast")}) {
    INFO(mode.back());
    Trainer accumulating(
        small_config(with(mode, {samples, "data.batch_size=8", "train.grad_accum=3"})), world,
        quiet_options());
    CHECK(accumulating.steps_per_epoch() == 3);
    const auto accumulated = train_checking_identity(accumulating, 7);
    CHECK(accumulating.batch_cursor() == 2 * 10 + 3);  // epoch 2, micro-batches 0-2 done
    const auto one_step =
        train(with(mode, {samples, "data.batch_size=24", "train.grad_accum=1"}), 7);
    CHECK(tolerance_ratio(accumulated, one_step, kRtol, kAtol) <= 1.0);
  }
}

TEST_CASE("gradient clipping in zero equals clipping in ddp", "[zero][clip]") {
  const std::vector<std::string> clip = {"train.clip_grad_norm=0.05", "parallel.bucket_cap_mb=0.002",
                                         "optimizer.kind=sgd", "optimizer.lr=0.5"};
  const auto ddp = train(with({"parallel.mode=ddp"}, clip), 10);
  const auto unclipped = train(with({"parallel.mode=ddp"}, {"parallel.bucket_cap_mb=0.002",
                                                            "optimizer.kind=sgd", "optimizer.lr=0.5"}), 10);
  CHECK(tolerance_ratio(unclipped, ddp, kRtol, kAtol) > 1.0);  // the clip really changed the run
  // Every bucket-owned mode that can clip (interleaved cannot: the config rejects it).
  for (const auto& mode : mode_overrides([](const Mode& m) {
         return m.ownership() == Ownership::Bucket && m.overlap != Overlap::Interleaved;
       })) {
    INFO(describe(mode));
    CHECK(tolerance_ratio(train(with(mode, clip), 10), ddp, kRtol, kAtol) <= 1.0);
  }
}
