// Fused optimizer kernels: one pass over a flat slice of (p, g, state), on ctx's device.
// Adam/AdamW reads p, g, m, v and writes p, m, v (28 bytes per parameter); SGD reads p, g (and the
// momentum buffer) and writes p (and the buffer). The element math lives in kernels/optim_math.h.
#pragma once

#include <cstdint>

#include "base/exec_context.h"
#include "kernels/optim_math.h"

namespace zl {

void adam_step(const ExecContext& ctx, float* p, const float* g, float* m, float* v,
               std::int64_t n, const AdamStep& step);

// momentum_buffer may be null only when step.momentum == 0.
void sgd_step(const ExecContext& ctx, float* p, const float* g, float* momentum_buffer,
              std::int64_t n, const SgdStep& step);

// The CPU loops, callable directly (tests, benchmarks).
void adam_step_cpu(float* p, const float* g, float* m, float* v, std::int64_t n,
                   const AdamStep& step);
void sgd_step_cpu(float* p, const float* g, float* momentum_buffer, std::int64_t n,
                  const SgdStep& step);

}  // namespace zl
