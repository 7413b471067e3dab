// Forward and backward of the layers in layers.h. Every computation goes through kernels/ with
// tape.exec() as ExecContext, so the same code runs on CPU and CUDA. Backward closures capture raw
// pointers (activations in the tape arena, parameters and gradients in the store's flat buffers),
// never the store or the tape: both may move between forward and backward without harm. A
// parameter a backward reads is read through its ParameterStore::param_slot (ZeRO stage 3 may
// bind it to another gather buffer by then), and the node names it (TapeNode::reads_param).
//
// Every backward closure follows one order, which Note [Grad-ready hook] requires:
//   1. d(pre-activation) and d(input) — the only reads of the parameter values;
//   2. parameter gradients, '=' or '+=' per ctx.accumulate (no zero_grad pass exists);
//   3. grad_ready for each parameter, in *reverse registration order* (bias before weight), so
//      gradients become ready in exactly the flat-layout order of Note [Flat layout].
// Closures never write what they read (saved activations, d(output)), so a tape may run backward
// more than once (Accumulate::Add tests rely on it).
//
// Each layer is a template on the storage type T of its activations and parameters (float or
// Bf16, the store's param_dtype()); the public functions dispatch once per call. The fp32 instance
// is the fp32 code as it was. For bf16 the GEMMs take bf16 operands and accumulate in fp32
// (kernels/gemm.h): activations and d(input) come out rounded to bf16 once, weight gradients go
// straight into the fp32 gradient buffer (beta = 1 accumulates there in fp32).
#include "models/layers.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "base/errors.h"
#include "kernels/gemm.h"

namespace zl {
namespace {

void use(const LayerCall& call, int param_id) {
  if (call.before_use && *call.before_use) (*call.before_use)(param_id);
}

Tensor out_grad_slot(Tape& tape, const LayerCall& call, std::int64_t rows, std::int64_t cols,
                     DType dtype) {
  if (call.out_grad.ptr == nullptr) return tape.alloc(rows, cols, dtype);
  ZL_CHECK(call.out_grad.rows == rows && call.out_grad.cols == cols && call.out_grad.dtype == dtype,
           "out_grad slot ({}, {}) {} for an output ({}, {}) {}", call.out_grad.rows,
           call.out_grad.cols, dtype_name(call.out_grad.dtype), rows, cols, dtype_name(dtype));
  return call.out_grad;
}

void check_input(const Tape& tape, const Value& x, std::int64_t features, const LayerCall& call,
                 const char* layer, DType dtype) {
  ZL_CHECK(x.value.dtype == dtype && (x.grad.ptr == nullptr || x.grad.dtype == dtype),
           "{} (layer {}) computes in {} but its input is {}", layer, call.layer,
           dtype_name(dtype), dtype_name(x.value.dtype));
  ZL_CHECK(x.value.cols == features, "{} (layer {}) expects {} features, got {}", layer, call.layer,
           features, x.value.cols);
  ZL_CHECK(x.value.device == tape.exec().device, "{} input on {}, tape on {}", layer,
           device_name(x.value.device), device_name(tape.exec().device));
  ZL_CHECK(x.grad.ptr == nullptr || (x.grad.rows == x.value.rows && x.grad.cols == features),
           "{}: input gradient slot has the wrong shape", layer);
  ZL_CHECK(call.skip_grad == nullptr || x.grad.ptr != nullptr,
           "{}: skip_grad given for an input without a gradient slot", layer);
}

constexpr std::uint64_t kSplitmixIncrement = 0x9e3779b97f4a7c15ULL;

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += kSplitmixIncrement);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

std::uint64_t fnv1a(const std::string& s) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

// The part of parameter p inside the window: its elements [first, first + n), written at out.
struct Overlap {
  float* out = nullptr;
  std::int64_t first = 0;
  std::int64_t n = 0;
};

Overlap overlap(const ParameterInfo& p, const InitWindow& w) {
  const std::int64_t begin = std::max(p.offset, w.offset);
  const std::int64_t end = std::min(p.offset + p.numel, w.offset + w.numel);
  if (begin >= end) return {};
  return {w.out + (begin - w.offset), begin - p.offset, end - begin};
}

}  // namespace

void fill_uniform(float* out, std::int64_t first, std::int64_t n, double bound, std::uint64_t seed,
                  const std::string& name) {
  std::uint64_t state = seed;
  state = splitmix64(state) ^ fnv1a(name);
  // splitmix64 counts: element i draws from the state i increments on (mod 2^64).
  state += static_cast<std::uint64_t>(first) * kSplitmixIncrement;
  constexpr double kTwo24 = 16777216.0;
  for (std::int64_t i = 0; i < n; ++i) {
    // 24 random bits k -> (2k - 2^24) / 2^24, exactly representable, in [-1, 1).
    const auto k = static_cast<double>(splitmix64(state) >> 40);
    out[i] = static_cast<float>(bound * ((2.0 * k - kTwo24) / kTwo24));
  }
}

// --- Linear -------------------------------------------------------------------------------------

LinearLayer add_linear(ParameterStore& store, const std::string& prefix, std::int64_t in,
                       std::int64_t out, Activation act) {
  LinearLayer l;
  l.weight = store.add(prefix + ".weight", {out, in});
  l.bias = store.add(prefix + ".bias", {out});
  store.mark_unread_in_backward(l.bias);  // db is the column sums of d(pre-activation)
  l.in = in;
  l.out = out;
  l.act = act;
  return l;
}

void init_linear(const ParameterStore& store, const LinearLayer& l, std::uint64_t seed,
                 const InitWindow& window) {
  // torch.nn.Linear.reset_parameters: kaiming_uniform_(a=sqrt(5)) on the weight reduces to
  // U(-1/sqrt(in), 1/sqrt(in)), and the bias uses the same bound.
  const double bound = 1.0 / std::sqrt(static_cast<double>(l.in));
  for (int id : {l.weight, l.bias}) {
    const ParameterInfo& p = store.info(id);
    const Overlap part = overlap(p, window);
    fill_uniform(part.out, part.first, part.n, bound, seed, p.name);
  }
}

namespace {

template <class T>
Value linear_forward_as(Tape& tape, ParameterStore& store, const LinearLayer& l, const Value& x,
                        const LayerCall& call) {
  constexpr DType kDType = dtype_of<T>;
  check_input(tape, x, l.in, call, "linear", kDType);
  use(call, l.weight);
  use(call, l.bias);
  const ExecContext ctx = tape.exec();
  const std::int64_t rows = x.value.rows, in = l.in, out = l.out;
  const Activation act = l.act;
  const T* w = store.param_as<T>(l.weight);
  const T* b = store.param_as<T>(l.bias);
  void* const* w_slot = store.param_slot(l.weight);  // backward reads W where it is bound then

  // pre (rows, out) = x (rows, in) W^T (in, out) + b. activation_backward needs pre itself, so it
  // is kept and the activation is a second pass, rather than fusing bias + activation into y and
  // recomputing pre (the same traffic, plus a write over a saved tensor) in backward.
  Tensor pre = tape.alloc(rows, out, kDType);
  gemm(ctx, Transpose::No, Transpose::Yes, rows, out, in, 1.0f, x.value.as<T>(), in, w, in, 0.0f,
       pre.as<T>(), out);
  bias_activation_forward(ctx, Activation::Identity, pre.as<T>(), b, pre.as<T>(), rows, out);

  Value y;
  y.grad = out_grad_slot(tape, call, rows, out, kDType);
  const T* dy = y.grad.as<T>();
  T* dpre = y.grad.as<T>();  // Identity: d(pre) is d(y), read in place
  if (act == Activation::Identity) {
    y.value = pre;
  } else {
    y.value = tape.alloc(rows, out, kDType);
    bias_activation_forward(ctx, act, pre.as<T>(), nullptr, y.value.as<T>(), rows, out);
    dpre = tape.alloc(rows, out, kDType).as<T>();  // never written over dy: dy may be read again
  }

  const T* xv = x.value.as<T>();
  T* dx = x.grad.as<T>();
  const T* skip = static_cast<const T*>(call.skip_grad);
  const T* pre_v = pre.as<T>();
  float* dw = store.param_grad(l.weight);
  float* db = store.param_grad(l.bias);
  const int weight_id = l.weight, bias_id = l.bias;
  auto backward = [=](const BackwardContext& bctx) {
    if (act != Activation::Identity) {
      activation_backward(ctx, act, pre_v, dy, dpre, rows * out);  // d(pre) (rows, out) =
    }
    if (dx != nullptr) {
      // dx (rows, in) = d(pre) (rows, out) W (out, in)   [+ skip path]
      const T* wb = static_cast<const T*>(*w_slot);
      gemm(ctx, Transpose::No, Transpose::No, rows, in, out, 1.0f, dpre, out, wb, in, 0.0f, dx,
           in);
      if (skip != nullptr) add(ctx, dx, skip, dx, rows * in);
    }
    // dW (out, in) =/+= d(pre)^T (out, rows) x (rows, in); beta 0 ignores the old contents.
    bctx.before_grad_write(weight_id);
    bctx.before_grad_write(bias_id);
    const float beta = bctx.accumulate == Accumulate::Add ? 1.0f : 0.0f;
    gemm(ctx, Transpose::Yes, Transpose::No, out, in, rows, 1.0f, dpre, out, xv, in, beta, dw, in);
    bias_backward(ctx, dpre, db, rows, out, bctx.accumulate);  // db (out) =/+= column sums
    bctx.grad_ready(bias_id);
    bctx.grad_ready(weight_id);
  };
  // Backward reads W only for d(input).
  tape.record(TapeNode{"linear", call.layer, std::move(backward), dx != nullptr ? weight_id : -1});
  return y;
}

}  // namespace

Value linear_forward(Tape& tape, ParameterStore& store, const LinearLayer& l, const Value& x,
                     const LayerCall& call) {
  return store.param_dtype() == DType::BF16 ? linear_forward_as<Bf16>(tape, store, l, x, call)
                                            : linear_forward_as<float>(tape, store, l, x, call);
}

// --- LayerNorm ----------------------------------------------------------------------------------

LayerNormLayer add_layernorm(ParameterStore& store, const std::string& prefix, std::int64_t dim,
                             float eps) {
  LayerNormLayer l;
  l.weight = store.add(prefix + ".weight", {dim});
  l.bias = store.add(prefix + ".bias", {dim});
  store.mark_unread_in_backward(l.bias);  // beta's gradient is the column sums of dy
  l.dim = dim;
  l.eps = eps;
  return l;
}

void init_layernorm(const ParameterStore& store, const LayerNormLayer& l, const InitWindow& window) {
  const Overlap gamma = overlap(store.info(l.weight), window);
  std::fill_n(gamma.out, gamma.n, 1.0f);
  const Overlap beta = overlap(store.info(l.bias), window);
  std::fill_n(beta.out, beta.n, 0.0f);
}

namespace {

template <class T>
Value layernorm_forward_as(Tape& tape, ParameterStore& store, const LayerNormLayer& l,
                           const Value& x, const LayerCall& call) {
  constexpr DType kDType = dtype_of<T>;
  check_input(tape, x, l.dim, call, "layernorm", kDType);
  use(call, l.weight);
  use(call, l.bias);
  const ExecContext ctx = tape.exec();
  const std::int64_t rows = x.value.rows, dim = l.dim;
  const T* gamma = store.param_as<T>(l.weight);
  const T* beta = store.param_as<T>(l.bias);
  void* const* gamma_slot = store.param_slot(l.weight);  // backward reads gamma where bound then

  Value y;
  y.value = tape.alloc(rows, dim, kDType);
  Tensor mean = tape.alloc(1, rows);  // statistics stay fp32
  Tensor rstd = tape.alloc(1, rows);
  layernorm_forward(ctx, x.value.as<T>(), gamma, beta, y.value.as<T>(), mean.f32(), rstd.f32(),
                    rows, dim, l.eps);
  y.grad = out_grad_slot(tape, call, rows, dim, kDType);

  // The kernel always writes dx; without a gradient slot for x it goes to scratch.
  T* dx = x.grad.ptr != nullptr ? x.grad.as<T>() : tape.alloc(rows, dim, kDType).as<T>();
  const T* xv = x.value.as<T>();
  const T* dy = y.grad.as<T>();
  const T* skip = static_cast<const T*>(call.skip_grad);
  const float* mean_v = mean.f32();
  const float* rstd_v = rstd.f32();
  float* dgamma = store.param_grad(l.weight);
  float* dbeta = store.param_grad(l.bias);
  const int weight_id = l.weight, bias_id = l.bias;
  auto backward = [=](const BackwardContext& bctx) {
    // dx (rows, dim) =; dgamma, dbeta (dim) =/+=
    bctx.before_grad_write(weight_id);
    bctx.before_grad_write(bias_id);
    layernorm_backward(ctx, xv, static_cast<const T*>(*gamma_slot), mean_v, rstd_v, dy, dx,
                       dgamma, dbeta, rows, dim, bctx.accumulate);
    if (skip != nullptr) add(ctx, dx, skip, dx, rows * dim);
    bctx.grad_ready(bias_id);
    bctx.grad_ready(weight_id);
  };
  tape.record(TapeNode{"layernorm", call.layer, std::move(backward), weight_id});
  return y;
}

}  // namespace

Value layernorm_forward(Tape& tape, ParameterStore& store, const LayerNormLayer& l, const Value& x,
                        const LayerCall& call) {
  return store.param_dtype() == DType::BF16
             ? layernorm_forward_as<Bf16>(tape, store, l, x, call)
             : layernorm_forward_as<float>(tape, store, l, x, call);
}

// --- Residual -----------------------------------------------------------------------------------

Value residual_add_forward(Tape& tape, const Value& skip, const Value& branch, int layer) {
  ZL_CHECK(skip.value.rows == branch.value.rows && skip.value.cols == branch.value.cols,
           "residual add of ({}, {}) and ({}, {})", skip.value.rows, skip.value.cols,
           branch.value.rows, branch.value.cols);
  ZL_CHECK(branch.grad.ptr != nullptr, "residual branch without a gradient slot");
  ZL_CHECK(skip.value.dtype == branch.value.dtype, "residual add of {} and {}",
           dtype_name(skip.value.dtype), dtype_name(branch.value.dtype));
  Value y;
  y.value = tape.alloc(skip.value.rows, skip.value.cols, skip.value.dtype);
  if (y.value.dtype == DType::BF16) {
    add(tape.exec(), skip.value.bf16(), branch.value.bf16(), y.value.bf16(), skip.value.numel());
  } else {
    add(tape.exec(), skip.value.f32(), branch.value.f32(), y.value.f32(), skip.value.numel());
  }
  y.grad = branch.grad;
  // No backward work: d(branch) = d(out) by aliasing, d(skip) is added by skip's first consumer.
  tape.record(TapeNode{"residual_add", layer, {}});
  return y;
}

ResidualBlock add_residual_block(ParameterStore& store, const std::string& prefix, std::int64_t dim,
                                 Activation act, float eps) {
  ResidualBlock b;
  b.norm = add_layernorm(store, prefix + ".norm", dim, eps);
  b.fc1 = add_linear(store, prefix + ".fc1", dim, dim, act);
  b.fc2 = add_linear(store, prefix + ".fc2", dim, dim, Activation::Identity);
  return b;
}

Value residual_block_forward(Tape& tape, ParameterStore& store, const ResidualBlock& b,
                             const Value& x, int first_layer, const ParamUseHook* before_use) {
  // d(block output) is one slot shared by fc2's output and the add's output. The norm, whose
  // backward runs last in the block, adds it to its own d(x): the fan-in of the skip path.
  Tensor dout = tape.alloc(x.value.rows, b.fc2.out, x.value.dtype);
  LayerCall call;
  call.before_use = before_use;

  call.layer = first_layer;
  call.skip_grad = x.grad.ptr != nullptr ? dout.ptr : nullptr;
  Value h = layernorm_forward(tape, store, b.norm, x, call);
  call.skip_grad = nullptr;

  call.layer = first_layer + 1;
  h = linear_forward(tape, store, b.fc1, h, call);

  call.layer = first_layer + 2;
  call.out_grad = dout;
  h = linear_forward(tape, store, b.fc2, h, call);

  return residual_add_forward(tape, x, h, first_layer + 3);
}

}  // namespace zl
