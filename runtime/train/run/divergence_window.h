// The per-window divergence check (StepCheck::EveryLogWindow: CUDA under train.on_nonfinite =
// "stop" without clipping, skip_step or max_loss, where a per-step verdict would drain the stream
// every step; docs/design.md, "Divergence"). A window is the steps between two log lines, or up
// to a checkpoint: its loss summed over ranks and the parameters' sum of squares must be finite.
#pragma once

#include <cstdint>

#include "base/exec_context.h"
#include "models/parameter_store.h"
#include "runtime/train/step/step_verdict.h"

namespace zl {

// This rank's part of a window's check: the sum of squares of its parameters (one read-back).
// Call with no step in flight.
double window_check_value(const ParameterStore& store, const ExecContext& compute);

// Throws NonfiniteStop when the window (steps first..last), summed over ranks, is not finite:
// `loss_sum` its training loss, `check_value` the parameters' sum of squares. Nothing under
// EveryStep.
void check_window(StepCheck check, double loss_sum, double check_value, std::int64_t first_step,
                  std::int64_t last_step);

}  // namespace zl
