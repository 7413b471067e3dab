// The LR schedule (runtime/train/step/rank_optimizer.h: scheduled_lr): constant, linear warm-up,
// cosine decay to min_lr at the last step. The step count t it takes is what checkpoints store, so
// a resumed run gets the same learning rates as one that never stopped.
#include <catch2/catch.hpp>

#include <cmath>
#include <numbers>

#include "runtime/config/config.h"
#include "runtime/train/step/rank_optimizer.h"

using zl::LrSchedule;
using zl::OptimizerConfig;
using zl::scheduled_lr;

TEST_CASE("constant schedule", "[checkpoint][lr_schedule]") {
  OptimizerConfig c;
  c.lr = 0.01f;
  for (std::int64_t t : {1, 2, 50, 100, 1000}) CHECK(scheduled_lr(c, t, 100) == 0.01f);
}

TEST_CASE("linear warm-up from 0 to lr, then constant", "[checkpoint][lr_schedule]") {
  OptimizerConfig c;
  c.lr = 0.1f;
  c.warmup_steps = 10;
  CHECK(scheduled_lr(c, 1, 100) == Approx(0.01).epsilon(1e-6));
  CHECK(scheduled_lr(c, 5, 100) == Approx(0.05).epsilon(1e-6));
  CHECK(scheduled_lr(c, 10, 100) == Approx(0.1).epsilon(1e-6));  // the end of warm-up: lr
  CHECK(scheduled_lr(c, 11, 100) == 0.1f);
  CHECK(scheduled_lr(c, 100, 100) == 0.1f);
  for (std::int64_t t = 2; t <= 10; ++t) CHECK(scheduled_lr(c, t, 100) > scheduled_lr(c, t - 1, 100));
}

TEST_CASE("cosine decay: lr after warm-up, towards min_lr as CosineAnnealingLR", "[checkpoint][lr_schedule]") {
  OptimizerConfig c;
  c.lr = 0.1f;
  c.min_lr = 0.001f;
  c.schedule = LrSchedule::Cosine;
  // Step t (from 1) runs at progress (t - warmup - 1) / (T - warmup).
  const auto cosine = [&](double progress) {
    return 0.001 + 0.5 * (0.1 - 0.001) * (1 + std::cos(std::numbers::pi * progress));
  };
  SECTION("without warm-up") {
    CHECK(scheduled_lr(c, 1, 100) == Approx(0.1).epsilon(1e-6));  // the first step: lr
    CHECK(scheduled_lr(c, 26, 100) == Approx(cosine(0.25)).epsilon(1e-6));
    CHECK(scheduled_lr(c, 51, 100) == Approx((0.1 + 0.001) / 2).epsilon(1e-6));  // the midpoint
    // The last step still moves the parameters (even with min_lr = 0); min_lr comes after it.
    CHECK(scheduled_lr(c, 100, 100) == Approx(cosine(0.99)).epsilon(1e-6));
    CHECK(scheduled_lr(c, 100, 100) > 0.001f);
    CHECK(scheduled_lr(c, 150, 100) == Approx(0.001).epsilon(1e-6));  // past the end: min_lr
    for (std::int64_t t = 2; t <= 100; ++t) CHECK(scheduled_lr(c, t, 100) < scheduled_lr(c, t - 1, 100));
  }
  SECTION("with warm-up") {
    c.warmup_steps = 20;
    CHECK(scheduled_lr(c, 10, 100) == Approx(0.05).epsilon(1e-6));
    CHECK(scheduled_lr(c, 20, 100) == Approx(0.1).epsilon(1e-6));  // warm-up peak
    CHECK(scheduled_lr(c, 21, 100) == Approx(0.1).epsilon(1e-6));  // the first decay step
    CHECK(scheduled_lr(c, 22, 100) < 0.1f);
    CHECK(scheduled_lr(c, 61, 100) == Approx((0.1 + 0.001) / 2).epsilon(1e-6));
    CHECK(scheduled_lr(c, 100, 100) == Approx(cosine(79.0 / 80.0)).epsilon(1e-6));
  }
}
