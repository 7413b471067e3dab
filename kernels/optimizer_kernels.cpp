// CPU loops of the fused optimizer kernels (one pass over p, g and the state), and the dispatch of
// adam_step / sgd_step to their CUDA twins. The element math is kernels/optim_math.h, shared with
// the CUDA kernel. These loops must vectorise (scripts/show_vectorization.sh checks it): they are
// built with -fno-math-errno so sqrtf becomes a vector instruction.
#include "kernels/optimizer_kernels.h"

#include <algorithm>

#include "base/errors.h"
#include "kernels/cpu_clones.h"
#include "kernels/cpu_parallel.h"
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

// The bf16 loops: one instantiation per (gradient type, master layout), so the inner loop is
// straight-line code over typed pointers.
template <class G>
void adam_bf16_loop(const Bf16OptimizerSlice& b, std::int64_t n, const AdamStep& step) {
  const AdamStep s = step;
  const G* __restrict g = static_cast<const G*>(b.grad);
  Bf16* __restrict param = b.param;
  float* __restrict m = b.m;
  float* __restrict v = b.v;
  if (b.master_weights == MasterWeights::Fp32) {
    float* __restrict master = b.master;
    for (std::int64_t i = 0; i < n; ++i) adam_update_master(master[i], param[i], g[i], m[i], v[i], s);
  } else {
    std::int16_t* __restrict rem = b.remainder;
    for (std::int64_t i = 0; i < n; ++i) adam_update_remainder(param[i], rem[i], g[i], m[i], v[i], s);
  }
}

template <class G>
void sgd_bf16_loop(const Bf16OptimizerSlice& b, std::int64_t n, const SgdStep& step) {
  const SgdStep s = step;
  const G* __restrict g = static_cast<const G*>(b.grad);
  Bf16* __restrict param = b.param;
  const bool momentum = s.momentum != 0.0f;
  float unused_buf = 0.0f;  // never read or written when momentum == 0 (sgd_update ignores it)
  if (b.master_weights == MasterWeights::Fp32) {
    float* __restrict master = b.master;
    for (std::int64_t i = 0; i < n; ++i) {
      sgd_update_master(master[i], param[i], g[i], momentum ? b.m[i] : unused_buf, s);
    }
  } else {
    std::int16_t* __restrict rem = b.remainder;
    for (std::int64_t i = 0; i < n; ++i) {
      sgd_update_remainder(param[i], rem[i], g[i], momentum ? b.m[i] : unused_buf, s);
    }
  }
}

void check_bf16_slice(const Bf16OptimizerSlice& b, std::int64_t n, bool needs_m, bool needs_v,
                      const char* what) {
  ZL_CHECK(n >= 0, "{}: n = {}", what, n);
  if (n == 0) return;
  ZL_CHECK(b.grad != nullptr && b.param != nullptr, "{}: null gradient or parameter", what);
  ZL_CHECK(b.master_weights == MasterWeights::Fp32 ? b.master != nullptr : b.remainder != nullptr,
           "{}: the {} master weights are null", what,
           b.master_weights == MasterWeights::Fp32 ? "fp32" : "remainder");
  ZL_CHECK(!needs_m || b.m != nullptr, "{}: null first moment / momentum buffer", what);
  ZL_CHECK(!needs_v || b.v != nullptr, "{}: null second moment", what);
}

void check_momentum_buffer(const float* momentum_buffer, std::int64_t n, const SgdStep& step) {
  ZL_CHECK(momentum_buffer != nullptr || n == 0, "sgd_step: momentum = {} needs a momentum buffer",
           step.momentum);
}

Bf16OptimizerSlice advanced(Bf16OptimizerSlice slice, std::int64_t begin) {
  slice.grad = static_cast<const char*>(slice.grad) + begin * dtype_size(slice.grad_dtype);
  slice.param += begin;
  if (slice.master) slice.master += begin;
  if (slice.remainder) slice.remainder += begin;
  if (slice.m) slice.m += begin;
  if (slice.v) slice.v += begin;
  return slice;
}

}  // namespace

// Note [ISA clones] (kernels/cpu_clones.h) for the four CPU entry points.
ZL_CPU_CLONES void adam_step_bf16_cpu(const Bf16OptimizerSlice& slice, std::int64_t n,
                                      const AdamStep& step) {
  check_bf16_slice(slice, n, true, true, "adam_step_bf16");
  if (n == 0) return;
  if (slice.grad_dtype == DType::F32) return adam_bf16_loop<float>(slice, n, step);
  adam_bf16_loop<Bf16>(slice, n, step);
}

ZL_CPU_CLONES void sgd_step_bf16_cpu(const Bf16OptimizerSlice& slice, std::int64_t n,
                                     const SgdStep& step) {
  check_bf16_slice(slice, n, step.momentum != 0.0f, false, "sgd_step_bf16");
  if (n == 0) return;
  if (slice.grad_dtype == DType::F32) return sgd_bf16_loop<float>(slice, n, step);
  sgd_bf16_loop<Bf16>(slice, n, step);
}

void adam_step_bf16(const ExecContext& ctx, const Bf16OptimizerSlice& slice, std::int64_t n,
                    const AdamStep& step) {
  // Checked here, on the calling thread: a chunk's thread must not throw.
  check_bf16_slice(slice, n, true, true, "adam_step_bf16");
  if (ctx.device == DeviceKind::Cuda) {
#if defined(ZEROLAP_WITH_CUDA)
    return adam_step_bf16_cuda(ctx, slice, n, step);
#else
    throw_built_without_cuda("adam_step_bf16");
#endif
  }
  for_chunks(ctx.cpu_threads, n, [&](std::int64_t begin, std::int64_t end) {
    adam_step_bf16_cpu(advanced(slice, begin), end - begin, step);
  });
}

void sgd_step_bf16(const ExecContext& ctx, const Bf16OptimizerSlice& slice, std::int64_t n,
                   const SgdStep& step) {
  // Checked here, on the calling thread: a chunk's thread must not throw.
  check_bf16_slice(slice, n, step.momentum != 0.0f, false, "sgd_step_bf16");
  if (ctx.device == DeviceKind::Cuda) {
#if defined(ZEROLAP_WITH_CUDA)
    return sgd_step_bf16_cuda(ctx, slice, n, step);
#else
    throw_built_without_cuda("sgd_step_bf16");
#endif
  }
  for_chunks(ctx.cpu_threads, n, [&](std::int64_t begin, std::int64_t end) {
    sgd_step_bf16_cpu(advanced(slice, begin), end - begin, step);
  });
}

std::int64_t optimizer_step_bytes_per_element(OptimizerKind kind, bool momentum, DType param_dtype,
                                              MasterWeights master, DType grad_dtype) {
  const std::int64_t state = kind == OptimizerKind::Sgd ? (momentum ? 8 : 0) : 16;  // r + w
  std::int64_t weights = 8;                                                         // fp32 p r + w
  if (param_dtype == DType::BF16) {
    weights = master == MasterWeights::Fp32 ? 8 + 2 : 4 + 4;  // master r+w + param w; param, rem r+w
  }
  return weights + state + dtype_size(grad_dtype);
}

// __restrict: p, g and the state are distinct slices of distinct flat buffers (bucket storage),
// and telling the compiler so spares it runtime alias checks (on the clones' own parameters:
// Note [ISA clones]).
ZL_CPU_CLONES void adam_step_cpu(float* __restrict p, const float* __restrict g,
                                 float* __restrict m, float* __restrict v, std::int64_t n,
                                 const AdamStep& step) {
  const AdamStep s = step;  // a local copy: the scalars cannot alias the arrays, so they stay in registers
  for (std::int64_t i = 0; i < n; ++i) adam_update(p[i], g[i], m[i], v[i], s);
}

ZL_CPU_CLONES void sgd_step_cpu(float* __restrict p, const float* __restrict g,
                                float* __restrict momentum_buffer, std::int64_t n,
                                const SgdStep& step) {
  if (step.momentum == 0.0f) return sgd_plain_loop(p, g, n, step);
  check_momentum_buffer(momentum_buffer, n, step);
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
  for_chunks(ctx.cpu_threads, n, [&](std::int64_t begin, std::int64_t end) {
    adam_step_cpu(p + begin, g + begin, m + begin, v + begin, end - begin, step);
  });
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
  // Checked here, on the calling thread: a chunk's thread must not throw.
  if (step.momentum != 0.0f) check_momentum_buffer(momentum_buffer, n, step);
  for_chunks(ctx.cpu_threads, n, [&](std::int64_t begin, std::int64_t end) {
    sgd_step_cpu(p + begin, g + begin, momentum_buffer ? momentum_buffer + begin : nullptr,
                 end - begin, step);
  });
}

}  // namespace zl
