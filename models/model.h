// The models zerolap trains, built from a ModelSpec: `mlp` (Linear + activation stack) and
// `residual_mlp` (input Linear, pre-LayerNorm residual blocks, final LayerNorm + Linear).
// A Model owns its ParameterStore (flat storage, see Note [Flat layout]) and records its forward
// on a Tape; it knows nothing of ranks, buckets or optimizers.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/elementwise.h"
#include "models/parameter_store.h"
#include "models/tape.h"
#include "models/tensor.h"

namespace zl {

enum class ModelKind { Mlp, ResidualMlp };

// The fp32 initial values of the flat range [offset, offset + numel) of a model's layout.
using InitialValues = std::function<std::vector<float>(std::int64_t offset, std::int64_t numel)>;

struct ModelSpec {
  ModelKind kind = ModelKind::Mlp;
  // mlp: [in, h1, ..., out]: Linear(in,h1)+act, ..., Linear(h_last, out) (no activation at the end).
  // residual_mlp: [in, d, d, ..., d, out]: Linear(in, d), then one pre-LN residual block
  //   x + Linear(d,d)(act(Linear(d,d)(LayerNorm(x)))) per further d, then LayerNorm + Linear(d, out).
  //   All inner widths must be equal.
  // Parameter names (PyTorch-style, registered in this order; the flat layout is the reverse):
  //   mlp:          layers.{i}.weight (out, in), layers.{i}.bias (out) for the i-th Linear.
  //   residual_mlp: input.weight/bias; per block i: blocks.{i}.norm.weight/bias (LayerNorm gamma,
  //                 beta), blocks.{i}.fc1.weight/bias, blocks.{i}.fc2.weight/bias; then
  //                 norm.weight/bias, output.weight/bias.
  // Tape layers (ForwardResult / TapeNode::layer): mlp: one per Linear (bias + activation fused);
  //   residual_mlp: input, then norm, fc1, fc2, residual add per block, then norm, output.
  std::vector<std::int64_t> widths;
  Activation activation = Activation::Relu;
  std::uint64_t seed = 0;
  float layernorm_eps = 1e-5f;
  // Storage of parameters, activations and activation gradients (docs/design.md, "Precision"):
  // F32 for compute = "fp32" / "tf32", BF16 for compute = "bf16". Gradients are fp32 either way.
  DType dtype = DType::F32;
};

// The most parameters a model may have: 2^40 (4 TiB of fp32), beyond any node zerolap runs on, so
// that every count and byte figure derived from the parameter count (per rank, per mode, at any
// world size a plan is made for) fits an int64 with room to spare.
inline constexpr std::int64_t kMaxModelParameters = std::int64_t{1} << 40;

// Checks a spec, including that its padded parameter count is computed without overflow and is
// at most kMaxModelParameters; throws UserError naming the problem (the caller adds the config
// key and file).
void validate_model_spec(const ModelSpec& spec);

struct ForwardResult {
  Tensor output;       // (batch, out): logits or predictions, in the model's dtype
  Tensor grad_output;  // (batch, out), same dtype: the caller writes d(loss)/d(output) here
};

class Model {
 public:
  // Registers parameters, lays them out and initialises them deterministically from spec.seed:
  // Linear weight and bias Kaiming-uniform as torch.nn.Linear's default (U(-1/sqrt(in), 1/sqrt(in))),
  // LayerNorm gamma = 1, beta = 0.
  // `padding`: extra zero padding of the flat layout (ZeRO's element shards; parameter_store.h).
  // `gradients`: Bound when the owner binds every parameter's gradient (ZeRO stage 2).
  // `storage` Gathered (ZeRO stage 3): no flat parameter buffer, nothing initialised here; the
  // shards start from initial_parameters() and forward binds what it gathers.
  Model(const ModelSpec& spec, DeviceKind device, const LayoutPadding& padding = {},
        GradientStorage gradients = GradientStorage::Flat,
        ParamStorage storage = ParamStorage::Flat);
  // The parameters this spec registers, laid out but not allocated (ParameterStore::lay_out):
  // what plans and memory estimates need, for a model of any size.
  static ParameterStore parameter_layout(const ModelSpec& spec, const LayoutPadding& padding = {});
  ~Model();
  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;

  const ModelSpec& spec() const { return spec_; }
  ParameterStore& store() { return store_; }
  const ParameterStore& store() const { return store_; }
  std::int64_t input_dim() const { return spec_.widths.front(); }
  std::int64_t output_dim() const { return spec_.widths.back(); }
  int num_layers() const;  // layers in forward order (for traces and per-layer waits)

  // Records the forward of input (batch, input_dim) on `tape` (reset by the caller) and returns
  // the output and the slot for its gradient. Calls before_use(id) before reading parameter id.
  // The input is fp32 or the model's dtype; a bf16 model rounds an fp32 input to bf16 first.
  ForwardResult forward(Tape& tape, const Tensor& input, const ParamUseHook& before_use = {});

  // Re-initialises every parameter from spec.seed (used by tests; the constructor already does).
  // A bf16 store receives master_to_bf16 of the fp32 values (base/bf16.h, Note [Remainders]), the
  // bf16 parameter that an fp32 master initialised from initial_parameters() goes with.
  void initialize_parameters();

  // The fp32 initial values of the flat range [offset, offset + numel) (padding zero), drawn for
  // that range alone: what fp32 master weights of a bf16 model and ZeRO stage 3's shards start
  // from, without a copy of the whole model on every rank. No arguments: the whole buffer.
  std::vector<float> initial_parameters(std::int64_t offset, std::int64_t numel) const;
  std::vector<float> initial_parameters() const;
  // initial_parameters(offset, numel) of this model, for the parts that keep a range of it.
  InitialValues initial_values() const;

 private:
  struct Layers;
  static void register_parameters(const ModelSpec& spec, ParameterStore& store, Layers& layers);
  ModelSpec spec_;
  ParameterStore store_;
  std::unique_ptr<Layers> layers_;
};

}  // namespace zl
