// CPU loops of the fused optimizer kernels (one pass over p, g and the state), and the dispatch of
// adam_step / sgd_step to their CUDA twins. The element math is kernels/optim_math.h, shared with
// the CUDA kernel. These loops must vectorise (scripts/show_vectorization.sh checks it): they are
// built with -fno-math-errno so sqrtf becomes a vector instruction.
#include "kernels/optimizer_kernels.h"

#include "base/errors.h"
#if defined(ZEROLAP_WITH_CUDA)
#include "kernels/cuda_kernels.h"
#endif

namespace zl {
namespace {

// SGD with momentum; kFirst and kNesterov are fixed per instantiation so the element function's
// branches fold away and the loop body is straight-line (vectorisable) code. The caller
// guarantees step.momentum != 0.
template <bool kFirst, bool kNesterov>
void sgd_momentum_loop(float* __restrict p, const float* __restrict g, float* __restrict buf,
                       std::int64_t n, SgdStep s) {
  s.first_step = kFirst;
  s.nesterov = kNesterov;
  for (std::int64_t i = 0; i < n; ++i) sgd_update(p[i], g[i], buf[i], s);
}

// SGD without momentum: no buffer is touched (it may be null); momentum is pinned to the
// constant 0 so the buffer branch of sgd_update disappears.
void sgd_plain_loop(float* __restrict p, const float* __restrict g, std::int64_t n, SgdStep s) {
  s.momentum = 0.0f;
  float unused_buf = 0.0f;  // never read or written once momentum is the constant 0
  for (std::int64_t i = 0; i < n; ++i) sgd_update(p[i], g[i], unused_buf, s);
}

}  // namespace

// __restrict: p, g and the state are distinct slices of distinct flat buffers (bucket storage),
// and telling the compiler so spares it runtime alias checks.
void adam_step_cpu(float* __restrict p, const float* __restrict g, float* __restrict m,
                   float* __restrict v, std::int64_t n, const AdamStep& step) {
  const AdamStep s = step;  // a local copy: the scalars cannot alias the arrays, so they stay in registers
  for (std::int64_t i = 0; i < n; ++i) adam_update(p[i], g[i], m[i], v[i], s);
}

void sgd_step_cpu(float* __restrict p, const float* __restrict g,
                  float* __restrict momentum_buffer, std::int64_t n, const SgdStep& step) {
  if (step.momentum == 0.0f) return sgd_plain_loop(p, g, n, step);
  ZL_CHECK(momentum_buffer != nullptr || n == 0, "sgd_step: momentum = {} needs a momentum buffer",
           step.momentum);
  if (step.first_step) {
    return step.nesterov ? sgd_momentum_loop<true, true>(p, g, momentum_buffer, n, step)
                         : sgd_momentum_loop<true, false>(p, g, momentum_buffer, n, step);
  }
  return step.nesterov ? sgd_momentum_loop<false, true>(p, g, momentum_buffer, n, step)
                       : sgd_momentum_loop<false, false>(p, g, momentum_buffer, n, step);
}

void adam_step(const ExecContext& ctx, float* p, const float* g, float* m, float* v,
               std::int64_t n, const AdamStep& step) {
  if (ctx.device == DeviceKind::Cuda) {
#if defined(ZEROLAP_WITH_CUDA)
    return adam_step_cuda(ctx, p, g, m, v, n, step);
#else
    throw_built_without_cuda("adam_step");
#endif
  }
  adam_step_cpu(p, g, m, v, n, step);
}

void sgd_step(const ExecContext& ctx, float* p, const float* g, float* momentum_buffer,
              std::int64_t n, const SgdStep& step) {
  if (ctx.device == DeviceKind::Cuda) {
#if defined(ZEROLAP_WITH_CUDA)
    return sgd_step_cuda(ctx, p, g, momentum_buffer, n, step);
#else
    throw_built_without_cuda("sgd_step");
#endif
  }
  sgd_step_cpu(p, g, momentum_buffer, n, step);
}

}  // namespace zl
