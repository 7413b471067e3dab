// Fused optimizer kernels: one pass over a flat slice of (p, g, state), on ctx's device.
// Adam/AdamW reads p, g, m, v and writes p, m, v (28 bytes per parameter); SGD reads p, g (and the
// momentum buffer) and writes p (and the buffer). The element math lives in kernels/optim_math.h.
// The bf16 forms step a bucket whose parameters are bf16 (docs/design.md, "Precision"): they read
// the gradient (fp32 or bf16), the fp32 master (or the bf16 parameter and its int16 remainder) and
// the optimizer state, and write the master (or remainder), the state and the bf16 parameter in
// the same pass: Adam with an fp32 master and bf16 gradients moves 28 bytes per parameter.
#pragma once

#include <cstdint>

#include "base/bf16.h"
#include "base/dtype.h"
#include "base/exec_context.h"
#include "kernels/optim_math.h"

namespace zl {

void adam_step(const ExecContext& ctx, float* p, const float* g, float* m, float* v,
               std::int64_t n, const AdamStep& step);

// momentum_buffer may be null only when step.momentum == 0.
void sgd_step(const ExecContext& ctx, float* p, const float* g, float* momentum_buffer,
              std::int64_t n, const SgdStep& step);

// One bf16 slice of n elements. The pointers are into distinct buffers (never aliased).
struct Bf16OptimizerSlice {
  const void* grad = nullptr;  // n gradients of grad_dtype (raw sums: step.grad_scale applies)
  DType grad_dtype = DType::F32;
  Bf16* param = nullptr;  // the bucket's bf16 parameters: written; read too with remainders
  MasterWeights master_weights = MasterWeights::Fp32;
  float* master = nullptr;            // MasterWeights::Fp32: the fp32 masters
  std::int16_t* remainder = nullptr;  // MasterWeights::Remainders: the 16 bits bf16 drops
  float* m = nullptr;  // Adam: first moment; SGD: momentum buffer (may be null when momentum == 0)
  float* v = nullptr;  // Adam: second moment
};

void adam_step_bf16(const ExecContext& ctx, const Bf16OptimizerSlice& slice, std::int64_t n,
                    const AdamStep& step);
void sgd_step_bf16(const ExecContext& ctx, const Bf16OptimizerSlice& slice, std::int64_t n,
                   const SgdStep& step);

// Bytes the fused step moves per element (reads + writes), the figure bandwidth is measured
// against: fp32 Adam 28; bf16 Adam with an fp32 master 26 + the gradient's size.
// `momentum`: SGD keeps a momentum buffer (Adam always keeps m and v).
std::int64_t optimizer_step_bytes_per_element(OptimizerKind kind, bool momentum, DType param_dtype,
                                              MasterWeights master, DType grad_dtype);

// The CPU loops, callable directly (tests, benchmarks).
void adam_step_bf16_cpu(const Bf16OptimizerSlice& slice, std::int64_t n, const AdamStep& step);
void sgd_step_bf16_cpu(const Bf16OptimizerSlice& slice, std::int64_t n, const SgdStep& step);
void adam_step_cpu(float* p, const float* g, float* m, float* v, std::int64_t n,
                   const AdamStep& step);
void sgd_step_cpu(float* p, const float* g, float* momentum_buffer, std::int64_t n,
                  const SgdStep& step);

}  // namespace zl
