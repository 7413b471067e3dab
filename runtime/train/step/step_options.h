// StepOptions: what a data-parallel step needs from [train], built once by the Trainer from the
// validated config and passed down by reference to the step's parts and the mode's schedule.
// Every user-facing constraint on these values (interleaved cannot clip or skip a step, ...) is
// checked when the config is read (runtime/config/config.cpp); here they only hold (assert_valid,
// which the step's parts call when they are built).
#pragma once

#include <cstdint>

#include "base/errors.h"
#include "runtime/config/config.h"
#include "runtime/train/plan/mode_plan.h"
#include "runtime/train/step/step_verdict.h"

namespace zl {

struct StepOptions {
  float clip_grad_norm = 0.0f;  // train.clip_grad_norm; 0: off
  std::int64_t grad_accum = 1;  // train.grad_accum: micro-batches per step
  OnNonfinite on_nonfinite = OnNonfinite::Stop;
  double max_loss = 0.0;  // train.max_loss; 0: none
  // When steps are checked for non-finite values (docs/design.md, "Divergence").
  StepCheck step_check = StepCheck::EveryStep;
};

// The step's options from `train`, checked every step or (where allowed) once per log window.
inline StepOptions make_step_options(const TrainConfig& train, StepCheck step_check) {
  return StepOptions{.clip_grad_norm = train.clip_grad_norm,
                     .grad_accum = train.grad_accum,
                     .on_nonfinite = train.on_nonfinite,
                     .max_loss = train.max_loss,
                     .step_check = step_check};
}

// Whether the step's verdict is needed before the step ends: to clip, to skip, or to compare the
// loss with train.max_loss. Only a plain "stop" may wait for the log window.
inline bool verdict_needed_every_step(const TrainConfig& train) {
  return train.clip_grad_norm > 0.0f || train.on_nonfinite == OnNonfinite::SkipStep ||
         train.max_loss > 0.0;
}

// Asserts (InternalError) what config validation guarantees for `mode`: a schedule that steps
// during backward neither clips nor skips, and a per-window check only where no step needs its
// verdict at once.
inline void assert_valid(const StepOptions& options, const ModePlan& mode) {
  ZL_CHECK(mode.can_clip || options.clip_grad_norm <= 0.0f, "{} cannot clip", mode.name());
  ZL_CHECK(mode.schedule != ScheduleKind::ZeroInterleaved ||
               options.on_nonfinite == OnNonfinite::Stop,
           "{} cannot skip a step", mode.name());
  ZL_CHECK(options.step_check == StepCheck::EveryStep ||
               (options.clip_grad_norm <= 0.0f && options.on_nonfinite == OnNonfinite::Stop &&
                options.max_loss <= 0.0),
           "clipping, skip_step and max_loss need the verdict of every step");
  ZL_CHECK(options.grad_accum >= 1, "grad_accum {}", options.grad_accum);
}

}  // namespace zl
