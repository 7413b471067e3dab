// The element-wise optimizer math of zerolap, shared by the CPU loop and the CUDA kernel.
// torch.optim semantics (docs/design.md, "Optimizer math"); t counts steps from 1. The host
// computes the per-step scalars once (make_adam_step / make_sgd_step) so the per-element code is
// a handful of multiply-adds: that keeps the CPU loop vectorisable and the CUDA kernel bandwidth-bound.
#pragma once

#include <cmath>
#include <cstdint>

#include "base/bf16.h"
#include "base/host_device.h"

namespace zl {

enum class OptimizerKind { Adam, AdamW, Sgd };

// How the owner of a bf16 bucket keeps its fp32 master weights (docs/design.md, "Precision"):
// an fp32 copy (4 bytes per element) or the int16 remainder that, joined with the bf16 parameter,
// rebuilds the fp32 value exactly (2 bytes; base/bf16.h Note [Remainders]). Both give bitwise
// equal results.
enum class MasterWeights { Fp32, Remainders };

struct AdamHyper {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
  bool decoupled_weight_decay = false;  // AdamW
};

struct SgdHyper {
  float lr = 1e-2f;
  float momentum = 0.0f;
  float dampening = 0.0f;
  float weight_decay = 0.0f;
  bool nesterov = false;
};

// Per-step scalars of one Adam/AdamW step, computed on the host.
struct AdamStep {
  float lr;
  float beta1, one_minus_beta1;
  float beta2, one_minus_beta2;
  float eps;
  float weight_decay;       // L2 term added to the gradient (Adam); 0 for AdamW
  float decay_factor;       // p *= decay_factor first (AdamW: 1 - lr*wd); 1 for Adam
  float step_size;          // lr / (1 - beta1^t)
  float bias_correction2_sqrt;  // sqrt(1 - beta2^t)
  float grad_scale;         // applied to the raw gradient first: 1/world (averaging) * clip coef
};

struct SgdStep {
  float lr, momentum, one_minus_dampening, weight_decay;
  bool nesterov;
  bool first_step;  // t == 1: the momentum buffer is initialised to d
  float grad_scale;
};

inline AdamStep make_adam_step(const AdamHyper& h, float lr, std::int64_t t, float grad_scale) {
  AdamStep s{};
  s.lr = lr;
  s.beta1 = h.beta1;
  s.one_minus_beta1 = 1.0f - h.beta1;
  s.beta2 = h.beta2;
  s.one_minus_beta2 = 1.0f - h.beta2;
  s.eps = h.eps;
  s.weight_decay = h.decoupled_weight_decay ? 0.0f : h.weight_decay;
  s.decay_factor = h.decoupled_weight_decay ? 1.0f - lr * h.weight_decay : 1.0f;
  const double bc1 = 1.0 - std::pow(static_cast<double>(h.beta1), static_cast<double>(t));
  const double bc2 = 1.0 - std::pow(static_cast<double>(h.beta2), static_cast<double>(t));
  s.step_size = static_cast<float>(lr / bc1);
  s.bias_correction2_sqrt = static_cast<float>(std::sqrt(bc2));
  s.grad_scale = grad_scale;
  return s;
}

inline SgdStep make_sgd_step(const SgdHyper& h, float lr, std::int64_t t, float grad_scale) {
  return SgdStep{lr,         h.momentum, 1.0f - h.dampening, h.weight_decay,
                 h.nesterov, t == 1,     grad_scale};
}

// One Adam/AdamW element: reads p, g, m, v; writes p, m, v.
ZL_HD inline void adam_update(float& p, float g, float& m, float& v, const AdamStep& s) {
  p *= s.decay_factor;
  g = g * s.grad_scale + s.weight_decay * p;
  m = s.beta1 * m + s.one_minus_beta1 * g;
  v = s.beta2 * v + s.one_minus_beta2 * g * g;
  const float denom = sqrtf(v) / s.bias_correction2_sqrt + s.eps;
  p -= s.step_size * (m / denom);
}

// One SGD element. `buf` is the momentum buffer (ignored when momentum == 0).
ZL_HD inline void sgd_update(float& p, float g, float& buf, const SgdStep& s) {
  float d = g * s.grad_scale + s.weight_decay * p;
  if (s.momentum != 0.0f) {
    buf = s.first_step ? d : s.momentum * buf + s.one_minus_dampening * d;
    d = s.nesterov ? d + s.momentum * buf : buf;
  }
  p -= s.lr * d;
}

// --- bf16 parameters with fp32 master weights (docs/design.md, "Precision") ---
// The gradient is read as fp32 or bf16 (reduce_dtype = "bf16"); the update itself is the fp32
// adam_update / sgd_update above, on the fp32 master. The bf16 parameter written next to it is
// master_to_bf16(master) (base/bf16.h Note [Remainders]), the value an int16 remainder pairs with,
// so MasterWeights::Fp32 and ::Remainders write bitwise-identical parameters.
ZL_HD inline float grad_to_float(float g) { return g; }
ZL_HD inline float grad_to_float(Bf16 g) { return bf16_to_float(g); }

// An updated master that is NaN, as one whose low 16 bits are zero (its sign and top bits, and the
// quiet bit), so that its bf16 parameter is NaN too. split_master rounds up when the low half is
// >= 0x8000, and for the NaNs 0x7FFF8000-0x7FFFFFFF and 0xFFFF8000-0xFFFFFFFF that wraps the top
// half to a bf16 zero; a GPU's arithmetic gives the one NaN 0x7FFFFFFF. A zero parameter reads as
// finite, and the per-window check of a diverged run (runtime/train/step/step_verdict.cpp) sums
// the parameters. Every other value passes unchanged, in both master layouts alike.
ZL_HD inline float nan_kept_in_bf16(float x) {
  const std::uint32_t u = float_bits(x);
  return (u & 0x7FFFFFFFu) > 0x7F800000u ? bits_float((u & 0xFFFF0000u) | 0x00400000u) : x;
}

// MasterWeights::Fp32: master (fp32) and param (bf16) hold the same weight; both are written.
template <class G>
ZL_HD inline void adam_update_master(float& master, Bf16& param, G g, float& m, float& v,
                                     const AdamStep& s) {
  adam_update(master, grad_to_float(g), m, v, s);
  master = nan_kept_in_bf16(master);
  param = master_to_bf16(master);
}
template <class G>
ZL_HD inline void sgd_update_master(float& master, Bf16& param, G g, float& buf, const SgdStep& s) {
  sgd_update(master, grad_to_float(g), buf, s);
  master = nan_kept_in_bf16(master);
  param = master_to_bf16(master);
}

// MasterWeights::Remainders: join(param, remainder) is the fp32 master; both are rewritten.
template <class G>
ZL_HD inline void adam_update_remainder(Bf16& param, std::int16_t& remainder, G g, float& m,
                                        float& v, const AdamStep& s) {
  float x = join_master(param, remainder);
  adam_update(x, grad_to_float(g), m, v, s);
  const SplitMaster split = split_master(nan_kept_in_bf16(x));
  param = split.hi;
  remainder = split.lo;
}
template <class G>
ZL_HD inline void sgd_update_remainder(Bf16& param, std::int16_t& remainder, G g, float& buf,
                                       const SgdStep& s) {
  float x = join_master(param, remainder);
  sgd_update(x, grad_to_float(g), buf, s);
  const SplitMaster split = split_master(nan_kept_in_bf16(x));
  param = split.hi;
  remainder = split.lo;
}

}  // namespace zl
