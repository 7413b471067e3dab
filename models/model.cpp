// Model: builds `mlp` / `residual_mlp` from a ModelSpec out of the layers in layers.h, registers
// their parameters in forward order (so the flat layout is backward order, Note [Flat layout]),
// initialises them deterministically from spec.seed, and records the forward on a Tape.
#include "models/model.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "base/checked_size.h"
#include "base/errors.h"
#include "models/layers.h"

namespace zl {
namespace {

// The flat layout's element count (Note [Flat layout]: every tensor padded to kAlignFloats) of the
// layers register_parameters adds, checked: widths such as [784, 2^54, 10] wrap an int64.
CheckedSize padded_parameter_count(const ModelSpec& spec) {
  const std::vector<std::int64_t>& w = spec.widths;
  const auto padded = [](CheckedSize n) {
    return checked_round_up(n, ParameterStore::kAlignFloats);
  };
  const auto linear = [&](std::int64_t in, std::int64_t out) {
    return padded(CheckedSize(out) * CheckedSize(in)) + padded(CheckedSize(out));
  };
  const auto layernorm = [&](std::int64_t d) { return padded(CheckedSize(d)) * CheckedSize(2); };
  CheckedSize total;
  if (spec.kind == ModelKind::Mlp) {
    for (std::size_t i = 0; i + 1 < w.size(); ++i) total += linear(w[i], w[i + 1]);
    return total;
  }
  const std::int64_t d = w[1];
  const auto blocks = static_cast<std::int64_t>(w.size()) - 3;
  total = linear(w[0], d) + CheckedSize(blocks) * (layernorm(d) + linear(d, d) + linear(d, d)) +
          layernorm(d) + linear(d, w.back());
  return total;
}

}  // namespace

void validate_model_spec(const ModelSpec& spec) {
  const bool residual = spec.kind == ModelKind::ResidualMlp;
  const std::size_t min_widths = residual ? 3 : 2;
  if (spec.widths.size() < min_widths) {
    throw UserError(fmt::format("widths has {} entries; {} needs at least {} ({})",
                                spec.widths.size(), residual ? "residual_mlp" : "mlp", min_widths,
                                residual ? "[in, d, ..., d, out]" : "[in, ..., out]"));
  }
  for (std::size_t i = 0; i < spec.widths.size(); ++i) {
    if (spec.widths[i] <= 0) {
      throw UserError(
          fmt::format("widths[{}] is {}; every width must be positive", i, spec.widths[i]));
    }
  }
  if (residual) {
    // Residual blocks add their input to their output: every inner width is the block width.
    for (std::size_t i = 2; i + 1 < spec.widths.size(); ++i) {
      if (spec.widths[i] != spec.widths[1]) {
        throw UserError(
            fmt::format("residual_mlp needs equal inner widths, but widths[{}] = {} differs from "
                        "widths[1] = {}",
                        i, spec.widths[i], spec.widths[1]));
      }
    }
  }
  if (!padded_parameter_count(spec).fits(kMaxModelParameters)) {
    throw UserError(fmt::format(
        "these widths give more than {} parameters (2^40, 4 TiB of fp32), the most a model may "
        "have{}; lower the widths",
        kMaxModelParameters,
        padded_parameter_count(spec).ok() ? "" : " (their products overflow a 64-bit count)"));
  }
  if (!(spec.layernorm_eps > 0.0f) || !std::isfinite(spec.layernorm_eps)) {
    throw UserError(
        fmt::format("layernorm eps is {}; it must be positive and finite", spec.layernorm_eps));
  }
}

// Parameter ids of the layers, in forward order. Exactly one of the two shapes is used.
struct Model::Layers {
  // mlp: "layers.{i}"
  std::vector<LinearLayer> linears;
  // residual_mlp: "input", "blocks.{i}", "norm", "output"
  LinearLayer input;
  std::vector<ResidualBlock> blocks;
  LayerNormLayer norm;
  LinearLayer output;
};

void Model::register_parameters(const ModelSpec& spec, ParameterStore& store, Layers& layers) {
  const std::vector<std::int64_t>& w = spec.widths;
  const std::size_t n = w.size();
  if (spec.kind == ModelKind::Mlp) {
    for (std::size_t i = 0; i + 1 < n; ++i) {
      const Activation act = i + 2 < n ? spec.activation : Activation::Identity;
      layers.linears.push_back(
          add_linear(store, fmt::format("layers.{}", i), w[i], w[i + 1], act));
    }
  } else {
    const std::int64_t d = w[1];
    layers.input = add_linear(store, "input", w[0], d, Activation::Identity);
    for (std::size_t i = 2; i + 1 < n; ++i) {
      layers.blocks.push_back(add_residual_block(store, fmt::format("blocks.{}", i - 2), d,
                                                 spec.activation, spec.layernorm_eps));
    }
    layers.norm = add_layernorm(store, "norm", d, spec.layernorm_eps);
    layers.output = add_linear(store, "output", d, w[n - 1], Activation::Identity);
  }
  // The first layer computes no d(input) (forward gives the input no gradient), so its backward
  // reads no weight either.
  store.mark_unread_in_backward(spec.kind == ModelKind::Mlp ? layers.linears.front().weight
                                                            : layers.input.weight);
}

Model::Model(const ModelSpec& spec, DeviceKind device, const LayoutPadding& padding,
             GradientStorage gradients, ParamStorage storage)
    : spec_(spec), layers_(std::make_unique<Layers>()) {
  validate_model_spec(spec_);
  register_parameters(spec_, store_, *layers_);
  store_.finalize(device, spec_.dtype, padding, gradients, storage);
  if (storage == ParamStorage::Flat) initialize_parameters();
}

ParameterStore Model::parameter_layout(const ModelSpec& spec, const LayoutPadding& padding) {
  validate_model_spec(spec);
  ParameterStore store;
  Layers layers;
  register_parameters(spec, store, layers);
  store.lay_out(padding);
  return store;
}

Model::~Model() = default;
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;

int Model::num_layers() const {
  if (spec_.kind == ModelKind::Mlp) return static_cast<int>(layers_->linears.size());
  // input, 4 per block, norm, output
  return 1 + ResidualBlock::kLayers * static_cast<int>(layers_->blocks.size()) + 2;
}

void Model::initialize_parameters() {
  // In windows of the flat buffer, padding included: re-initialising also restores the zero
  // padding (Note [Flat layout]), and no host copy of the whole model is made.
  ZL_CHECK(store_.storage() == ParamStorage::Flat, "initialize_parameters() without flat parameters");
  constexpr std::int64_t kWindow = std::int64_t{1} << 22;  // elements: 16 MiB of host floats
  const std::int64_t total = store_.total_numel();
  std::vector<Bf16> rounded;
  for (std::int64_t offset = 0; offset < total; offset += kWindow) {
    const std::int64_t n = std::min(kWindow, total - offset);
    const std::vector<float> host = initial_parameters(offset, n);
    if (store_.param_dtype() == DType::BF16) {
      rounded.resize(host.size());
      for (std::size_t i = 0; i < host.size(); ++i) rounded[i] = master_to_bf16(host[i]);
      copy_from_host(rounded.data(), store_.params_as<Bf16>() + offset, store_.device(), n);
    } else {
      copy_from_host(host.data(), store_.data() + offset, store_.device(), n);
    }
  }
}

std::vector<float> Model::initial_parameters(std::int64_t offset, std::int64_t numel) const {
  ZL_CHECK(offset >= 0 && numel >= 0 && offset + numel <= store_.total_numel(),
           "initial values of [{}, {}) outside the {} elements of the layout", offset,
           offset + numel, store_.total_numel());
  std::vector<float> host(static_cast<std::size_t>(numel), 0.0f);
  const InitWindow window{host.data(), offset, numel};
  const std::uint64_t seed = spec_.seed;
  if (spec_.kind == ModelKind::Mlp) {
    for (const LinearLayer& l : layers_->linears) init_linear(store_, l, seed, window);
  } else {
    init_linear(store_, layers_->input, seed, window);
    for (const ResidualBlock& b : layers_->blocks) {
      init_layernorm(store_, b.norm, window);
      init_linear(store_, b.fc1, seed, window);
      init_linear(store_, b.fc2, seed, window);
    }
    init_layernorm(store_, layers_->norm, window);
    init_linear(store_, layers_->output, seed, window);
  }
  return host;
}

std::vector<float> Model::initial_parameters() const {
  return initial_parameters(0, store_.total_numel());
}

InitialValues Model::initial_values() const {
  return [this](std::int64_t offset, std::int64_t numel) {
    return initial_parameters(offset, numel);
  };
}

ForwardResult Model::forward(Tape& tape, const Tensor& input, const ParamUseHook& before_use) {
  if (input.cols != input_dim()) {
    throw UserError(
        fmt::format("the model input has {} features but the model expects {} "
                    "(model.widths[0])",
                    input.cols, input_dim()));
  }
  ZL_CHECK(tape.exec().device == store_.device(), "tape on {}, model on {}",
           device_name(tape.exec().device), device_name(store_.device()));
  const DType dtype = store_.param_dtype();
  Tensor x = input;
  if (input.dtype != dtype) {
    ZL_CHECK(input.dtype == DType::F32 && dtype == DType::BF16, "a {} model given {} input",
             dtype_name(dtype), dtype_name(input.dtype));
    x = tape.alloc(input.rows, input.cols, dtype);
    cast(tape.exec(), input.f32(), x.bf16(), input.numel());
  }
  // Nobody needs d(input): the first layer skips its dx GEMM.
  Value h{x, Tensor{nullptr, x.rows, x.cols, x.device, dtype}};
  const ParamUseHook* hook = before_use ? &before_use : nullptr;
  LayerCall call;
  call.before_use = hook;
  int layer = 0;
  if (spec_.kind == ModelKind::Mlp) {
    for (const LinearLayer& l : layers_->linears) {
      call.layer = layer++;
      h = linear_forward(tape, store_, l, h, call);
    }
  } else {
    call.layer = layer++;
    h = linear_forward(tape, store_, layers_->input, h, call);
    for (const ResidualBlock& b : layers_->blocks) {
      h = residual_block_forward(tape, store_, b, h, layer, hook);
      layer += ResidualBlock::kLayers;
    }
    call.layer = layer++;
    h = layernorm_forward(tape, store_, layers_->norm, h, call);
    call.layer = layer++;
    h = linear_forward(tape, store_, layers_->output, h, call);
  }
  ZL_CHECK(layer == num_layers(), "forward recorded {} layers, num_layers() = {}", layer,
           num_layers());
  return ForwardResult{h.value, h.grad};
}

}  // namespace zl
