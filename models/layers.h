// The layers of autograd-lite: Linear with a fused bias + activation, LayerNorm, residual add,
// and the pre-LN residual block built from them. A layer's *_forward computes on tape.exec(),
// allocates its output and the output's gradient slot from the tape, and records one TapeNode whose
// backward writes d(input) and the parameter gradients, then reports the parameters ready
// (Note [Grad-ready hook]). Layers hold parameter ids only; values live in the ParameterStore.
// Layers compute in the store's parameter dtype (docs/design.md, "Precision"): activations, their
// gradients and the parameters read are fp32 or bf16 alike; parameter gradients are always fp32
// (GEMMs and column sums accumulate into the fp32 gradient buffer).
#pragma once

#include <cstdint>
#include <string>

#include "kernels/elementwise.h"
#include "models/parameter_store.h"
#include "models/tape.h"
#include "models/tensor.h"

namespace zl {

// An activation and the slot for d(loss)/d(activation), both (batch, features) from the tape.
// grad.ptr == nullptr: nobody needs this gradient (the model input), so it is not computed.
struct Value {
  Tensor value;
  Tensor grad;
};

// How one layer call is wired into the tape.
struct LayerCall {
  int layer = -1;                            // TapeNode::layer
  const ParamUseHook* before_use = nullptr;  // called with each parameter id before it is read
  // The slot for d(output); empty: allocate one. The residual block passes its own so that the
  // branch's last layer and the residual add share one slot (see residual_block_forward).
  Tensor out_grad;
  // Gradient fan-in: when set, d(input) = (this layer's contribution) + skip_grad[i]. The residual
  // block's first layer adds the skip path here: its backward runs last among the block's nodes.
  // Its elements have the store's parameter dtype, as every activation gradient.
  const void* skip_grad = nullptr;
};

// Linear: y = act(x W^T + b), W (out, in) as torch.nn.Linear, b (out).
// Parameters "<prefix>.weight" then "<prefix>.bias".
struct LinearLayer {
  int weight = -1;
  int bias = -1;
  std::int64_t in = 0;
  std::int64_t out = 0;
  Activation act = Activation::Identity;
};
LinearLayer add_linear(ParameterStore& store, const std::string& prefix, std::int64_t in,
                       std::int64_t out, Activation act);
// A window [offset, offset + numel) of the flat layout and where its values go (`out`, numel
// floats): the inits below write the part of each of their parameters inside it, so a rank that
// keeps a part of the model (ZeRO stage 3's shards, bf16 masters) draws that part alone.
struct InitWindow {
  float* out = nullptr;
  std::int64_t offset = 0;
  std::int64_t numel = 0;
};

// Torch's default init: weight and bias ~ U(-1/sqrt(in), 1/sqrt(in)), drawn from `seed`.
void init_linear(const ParameterStore& store, const LinearLayer& l, std::uint64_t seed,
                 const InitWindow& window);
Value linear_forward(Tape& tape, ParameterStore& store, const LinearLayer& l, const Value& x,
                     const LayerCall& call);

// LayerNorm over features: y = (x - mean) / sqrt(var + eps) * gamma + beta.
// Parameters "<prefix>.weight" (gamma) then "<prefix>.bias" (beta), as torch.nn.LayerNorm.
struct LayerNormLayer {
  int weight = -1;
  int bias = -1;
  std::int64_t dim = 0;
  float eps = 1e-5f;
};
LayerNormLayer add_layernorm(ParameterStore& store, const std::string& prefix, std::int64_t dim,
                             float eps);
void init_layernorm(const ParameterStore& store, const LayerNormLayer& l, const InitWindow& window);
Value layernorm_forward(Tape& tape, ParameterStore& store, const LayerNormLayer& l, const Value& x,
                        const LayerCall& call);

// out = skip + branch. d(skip) and d(branch) both equal d(out), so the add needs no backward
// work: the returned Value's gradient slot *is* branch.grad (branch must have no other consumer),
// and the skip path's share is added by the layer that consumed `skip` first
// (LayerCall::skip_grad).
Value residual_add_forward(Tape& tape, const Value& skip, const Value& branch, int layer);

// Pre-LN residual block: x + fc2(act(fc1(norm(x)))). Parameters "<prefix>.norm.*",
// "<prefix>.fc1.*", "<prefix>.fc2.*"; four tape layers starting at `first_layer`.
struct ResidualBlock {
  LayerNormLayer norm;
  LinearLayer fc1;
  LinearLayer fc2;
  static constexpr int kLayers = 4;  // norm, fc1, fc2, add
};
ResidualBlock add_residual_block(ParameterStore& store, const std::string& prefix, std::int64_t dim,
                                 Activation act, float eps);
Value residual_block_forward(Tape& tape, ParameterStore& store, const ResidualBlock& b,
                             const Value& x, int first_layer, const ParamUseHook* before_use);

// Deterministic U(-bound, bound) floats from (seed, name): splitmix64, not std distributions
// (their output is implementation-defined). Keyed by name so a parameter's init does not depend
// on which other parameters exist. |result| <= bound exactly. Elements [first, first + n) of
// the stream: the same values as the whole stream has there.
void fill_uniform(float* out, std::int64_t first, std::int64_t n, double bound, std::uint64_t seed,
                  const std::string& name);

}  // namespace zl
