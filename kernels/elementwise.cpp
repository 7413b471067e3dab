// CPU implementations of the element-wise and row-wise kernels in kernels/elementwise.h, and the
// dispatch of every entry point to its CUDA twin (kernels/cuda_kernels.h). Reductions accumulate in
// a fixed order (deterministic run to run); the inner loops are written so GCC vectorises them
// (activation and mode switches sit outside the loops). Each kernel is a template on the storage
// type T (float or Bf16) that loads with to_f32 and stores with from_f32<T> (base/bf16.h): for
// T = float both are the identity, so the fp32 instances compute exactly what they did before
// bf16 existed.
#include "kernels/elementwise.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "base/errors.h"
#include "kernels/cpu_clones.h"
#include "kernels/cpu_parallel.h"
#if defined(ZEROLAP_WITH_CUDA)
#include "kernels/cuda_kernels.h"
#endif

namespace zl {
namespace {

// GELU, tanh approximation, with PyTorch's constants (gelu(approximate='tanh')).
constexpr float kGeluBeta = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluKappa = 0.044715f;

struct IdentityOp {
  float operator()(float v) const { return v; }
};
struct ReluOp {
  // std::max(v, 0) keeps NaN (v < 0 is false), as torch.relu does.
  float operator()(float v) const { return std::max(v, 0.0f); }
};
struct GeluOp {
  float operator()(float v) const {
    const float inner = kGeluBeta * (v + kGeluKappa * v * v * v);
    return 0.5f * v * (1.0f + std::tanh(inner));
  }
};
struct TanhOp {
  float operator()(float v) const { return std::tanh(v); }
};

// Checked on the calling thread before a split: a chunk's thread must not throw
// (kernels/cpu_parallel.h).
void check_activation(Activation act, const char* what) {
  ZL_CHECK(act == Activation::Identity || act == Activation::Relu || act == Activation::Gelu ||
               act == Activation::Tanh,
           "{}: unknown activation {}", what, static_cast<int>(act));
}

// y (rows, cols) = op(x + bias); x and y may alias (each element is read before it is written).
template <class T, class Op>
void bias_act_rows(const T* x, const T* bias, T* y, std::int64_t rows, std::int64_t cols, Op op) {
  for (std::int64_t i = 0; i < rows; ++i) {
    const T* xr = x + i * cols;
    T* yr = y + i * cols;
    if (bias != nullptr) {
      for (std::int64_t j = 0; j < cols; ++j) {
        yr[j] = from_f32<T>(op(to_f32(xr[j]) + to_f32(bias[j])));
      }
    } else {
      for (std::int64_t j = 0; j < cols; ++j) yr[j] = from_f32<T>(op(to_f32(xr[j])));
    }
  }
}

template <class T>
void bias_activation_forward_cpu(Activation act, const T* x, const T* bias, T* y,
                                 std::int64_t rows, std::int64_t cols) {
  switch (act) {
    case Activation::Identity: return bias_act_rows(x, bias, y, rows, cols, IdentityOp{});
    case Activation::Relu: return bias_act_rows(x, bias, y, rows, cols, ReluOp{});
    case Activation::Gelu: return bias_act_rows(x, bias, y, rows, cols, GeluOp{});
    case Activation::Tanh: return bias_act_rows(x, bias, y, rows, cols, TanhOp{});
  }
  ZL_CHECK(false, "bias_activation_forward: unknown activation {}", static_cast<int>(act));
}

// dx = dy * act'(pre); dx may alias dy, so no __restrict on those two.
template <class T>
void activation_backward_cpu(Activation act, const T* pre, const T* dy, T* dx, std::int64_t n) {
  switch (act) {
    case Activation::Identity:
      if (dx != dy) std::copy(dy, dy + n, dx);
      return;
    case Activation::Relu:
      // Derivative 0 at pre == 0, as PyTorch's threshold_backward.
      // dy is loaded unconditionally so the select if-converts and the loop vectorises.
      for (std::int64_t i = 0; i < n; ++i) {
        const T d = dy[i];
        dx[i] = to_f32(pre[i]) > 0.0f ? d : from_f32<T>(0.0f);
      }
      return;
    case Activation::Gelu:
      // d/dx [0.5 x (1 + tanh(u))], u = beta (x + kappa x^3): PyTorch's GeluBackward (tanh).
      for (std::int64_t i = 0; i < n; ++i) {
        const float v = to_f32(pre[i]);
        const float v2 = v * v;
        const float t = std::tanh(kGeluBeta * (v + kGeluKappa * v2 * v));
        const float left_derivative = 0.5f * (1.0f + t);
        const float right_derivative =
            0.5f * v * (1.0f - t * t) * kGeluBeta * (1.0f + 3.0f * kGeluKappa * v2);
        dx[i] = from_f32<T>(to_f32(dy[i]) * (left_derivative + right_derivative));
      }
      return;
    case Activation::Tanh:
      for (std::int64_t i = 0; i < n; ++i) {
        const float t = std::tanh(to_f32(pre[i]));
        dx[i] = from_f32<T>(to_f32(dy[i]) * (1.0f - t * t));
      }
      return;
  }
  ZL_CHECK(false, "activation_backward: unknown activation {}", static_cast<int>(act));
}

// Column sums row by row, so the inner loop runs along contiguous memory and vectorises; columns
// [0, cols) of a matrix with row stride ld (a column range of a wider one: each column's sum is
// still taken over the rows in order, wherever the range starts).
template <class T>
void bias_backward_cpu(const T* __restrict dy, float* __restrict dbias, std::int64_t rows,
                       std::int64_t cols, std::int64_t ld, Accumulate acc) {
  if (acc == Accumulate::Overwrite) std::fill(dbias, dbias + cols, 0.0f);
  for (std::int64_t i = 0; i < rows; ++i) {
    const T* __restrict row = dy + i * ld;
    for (std::int64_t j = 0; j < cols; ++j) dbias[j] += to_f32(row[j]);
  }
}

template <class T>
void add_cpu(const T* a, const T* b, T* out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = from_f32<T>(to_f32(a[i]) + to_f32(b[i]));
}

template <class T>
void accumulate_cpu(const T* a, T* out, std::int64_t n, Accumulate acc) {
  if (acc == Accumulate::Overwrite) {
    if (out != a) std::copy(a, a + n, out);
    return;
  }
  for (std::int64_t i = 0; i < n; ++i) out[i] = from_f32<T>(to_f32(out[i]) + to_f32(a[i]));
}

// Two passes per row in double (mean, then the biased variance), as accurate as PyTorch's Welford
// and simpler; the normalising pass is float and vectorises.
template <class T>
void layernorm_forward_cpu(const T* x, const T* gamma, const T* beta, T* y, float* mean,
                           float* rstd, std::int64_t rows, std::int64_t cols, float eps) {
  ZL_CHECK(cols > 0 || rows == 0, "layernorm_forward: cols = 0 with rows = {}", rows);
  for (std::int64_t i = 0; i < rows; ++i) {
    const T* xr = x + i * cols;
    double sum = 0.0;
    for (std::int64_t j = 0; j < cols; ++j) sum += to_f32(xr[j]);
    const double mu = sum / static_cast<double>(cols);
    double sq = 0.0;
    for (std::int64_t j = 0; j < cols; ++j) {
      const double d = to_f32(xr[j]) - mu;
      sq += d * d;
    }
    const double var = sq / static_cast<double>(cols);
    const float mu_f = static_cast<float>(mu);
    const float rs_f = static_cast<float>(1.0 / std::sqrt(var + static_cast<double>(eps)));
    mean[i] = mu_f;
    rstd[i] = rs_f;
    T* yr = y + i * cols;
    for (std::int64_t j = 0; j < cols; ++j) {
      yr[j] = from_f32<T>((to_f32(xr[j]) - mu_f) * rs_f * to_f32(gamma[j]) + to_f32(beta[j]));
    }
  }
}

// With xhat = (x - mean) * rstd and g = dy * gamma:
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat)),  dgamma += sum_rows dy * xhat,
//   dbeta += sum_rows dy.
template <class T>
void layernorm_backward_cpu(const T* __restrict x, const T* __restrict gamma,
                            const float* __restrict mean, const float* __restrict rstd,
                            const T* dy, T* dx, float* __restrict dgamma,
                            float* __restrict dbeta, std::int64_t rows, std::int64_t cols,
                            Accumulate acc) {
  if (acc == Accumulate::Overwrite) {
    std::fill(dgamma, dgamma + cols, 0.0f);
    std::fill(dbeta, dbeta + cols, 0.0f);
  }
  for (std::int64_t i = 0; i < rows; ++i) {
    const T* xr = x + i * cols;
    const T* dyr = dy + i * cols;
    const float mu = mean[i];
    const float rs = rstd[i];
    double sum_g = 0.0;
    double sum_g_xhat = 0.0;
    for (std::int64_t j = 0; j < cols; ++j) {
      const float xhat = (to_f32(xr[j]) - mu) * rs;
      const float dyj = to_f32(dyr[j]);
      const float g = dyj * to_f32(gamma[j]);
      sum_g += g;
      sum_g_xhat += static_cast<double>(g) * xhat;
      dgamma[j] += dyj * xhat;
      dbeta[j] += dyj;
    }
    const float mean_g = static_cast<float>(sum_g / static_cast<double>(cols));
    const float mean_g_xhat = static_cast<float>(sum_g_xhat / static_cast<double>(cols));
    // dx is written after every read of this row's dy, so dx may alias dy.
    T* dxr = dx + i * cols;
    for (std::int64_t j = 0; j < cols; ++j) {
      const float xhat = (to_f32(xr[j]) - mu) * rs;
      dxr[j] = from_f32<T>(rs * (to_f32(dyr[j]) * to_f32(gamma[j]) - mean_g - xhat * mean_g_xhat));
    }
  }
}

template <class T>
double softmax_cross_entropy_cpu(const T* logits, const std::int32_t* labels, std::int64_t rows,
                                 std::int64_t cols, T* dlogits, float grad_scale,
                                 std::int64_t* correct) {
  // Validate every label first, so a bad label leaves no half-written dlogits behind.
  for (std::int64_t i = 0; i < rows; ++i) {
    if (labels[i] < 0 || labels[i] >= cols) {
      throw UserError(fmt::format(
          "softmax_cross_entropy: label {} of row {} is outside [0, {}); the data's labels do "
          "not match the model's number of classes (its last width)",
          labels[i], i, cols));
    }
  }
  double loss_sum = 0.0;
  std::int64_t n_correct = 0;
  for (std::int64_t i = 0; i < rows; ++i) {
    const T* xr = logits + i * cols;
    const std::int32_t label = labels[i];
    // argmax: the first maximal index, as torch.argmax.
    float max_v = to_f32(xr[0]);
    std::int64_t argmax = 0;
    for (std::int64_t j = 1; j < cols; ++j) {
      if (to_f32(xr[j]) > max_v) {
        max_v = to_f32(xr[j]);
        argmax = j;
      }
    }
    if (argmax == label) ++n_correct;
    const float label_logit = to_f32(xr[label]);
    // log-sum-exp shifted by the max: exp never overflows, however large the logits; the sum of
    // the (float) exponentials is taken in double.
    double sum_exp = 0.0;
    if (dlogits != nullptr && std::is_same_v<T, float>) {
      // Every read of xr[j] precedes the write of dr[j]: dlogits may alias logits.
      T* dr = dlogits + i * cols;
      for (std::int64_t j = 0; j < cols; ++j) {
        dr[j] = from_f32<T>(std::exp(to_f32(xr[j]) - max_v));
        sum_exp += to_f32(dr[j]);
      }
      const float norm_scale = static_cast<float>(static_cast<double>(grad_scale) / sum_exp);
      for (std::int64_t j = 0; j < cols; ++j) dr[j] = from_f32<T>(to_f32(dr[j]) * norm_scale);
      dr[label] = from_f32<T>(to_f32(dr[label]) - grad_scale);
    } else if (dlogits != nullptr) {
      // bf16: the exponentials are not parked in dlogits (that would round them before the
      // normalisation); they are recomputed, and each gradient is rounded once, as on CUDA.
      T* dr = dlogits + i * cols;
      for (std::int64_t j = 0; j < cols; ++j) sum_exp += std::exp(to_f32(xr[j]) - max_v);
      const float norm_scale = static_cast<float>(static_cast<double>(grad_scale) / sum_exp);
      for (std::int64_t j = 0; j < cols; ++j) {
        float d = std::exp(to_f32(xr[j]) - max_v) * norm_scale;
        if (j == label) d -= grad_scale;
        dr[j] = from_f32<T>(d);
      }
    } else {
      for (std::int64_t j = 0; j < cols; ++j) sum_exp += std::exp(to_f32(xr[j]) - max_v);
    }
    loss_sum += std::log(sum_exp) - (static_cast<double>(label_logit) - max_v);
  }
  if (correct != nullptr) *correct = n_correct;
  return loss_sum;
}

// Double sums over floats, in 8 independent lanes so the loop vectorises without reassociation
// flags; the lane order is fixed, so results are bitwise reproducible.
constexpr int kLanes = 8;

// dpred may alias pred or target: it is written in a separate pass after the sum.
template <class T>
double squared_error_cpu(const T* pred, const float* target, std::int64_t n, T* dpred,
                         float grad_scale) {
  double lanes[kLanes] = {};
  const std::int64_t n_blocked = n - n % kLanes;
  for (std::int64_t i = 0; i < n_blocked; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      const double d = static_cast<double>(to_f32(pred[i + l])) - target[i + l];
      lanes[l] += d * d;
    }
  }
  double total = 0.0;
  for (std::int64_t i = n_blocked; i < n; ++i) {
    const double d = static_cast<double>(to_f32(pred[i])) - target[i];
    total += d * d;
  }
  for (int l = 0; l < kLanes; ++l) total += lanes[l];
  if (dpred != nullptr) {
    const float two_scale = 2.0f * grad_scale;
    for (std::int64_t i = 0; i < n; ++i) {
      dpred[i] = from_f32<T>(two_scale * (to_f32(pred[i]) - target[i]));
    }
  }
  return total;
}

template <class T>
ZL_CPU_CLONES double sum_of_squares_block(const T* __restrict x, std::int64_t n) {
  double lanes[kLanes] = {};
  const std::int64_t n_blocked = n - n % kLanes;
  for (std::int64_t i = 0; i < n_blocked; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      const double v = to_f32(x[i + l]);
      lanes[l] += v * v;
    }
  }
  double total = 0.0;
  for (std::int64_t i = n_blocked; i < n; ++i) {
    const double v = to_f32(x[i]);
    total += v * v;
  }
  for (int l = 0; l < kLanes; ++l) total += lanes[l];
  return total;
}

// A sum of squares is the in-order sum of the sums of fixed blocks of kMinChunkElements, each
// taken in lanes (sum_of_squares_block): the blocks, not the threads, fix the order, so the value
// is the same bits whatever the thread count, and one block is exactly the lane sum.
template <class T>
double sum_of_squares_cpu(int threads, const T* x, std::int64_t n) {
  constexpr std::int64_t kBlock = kMinChunkElements;
  const std::int64_t blocks = (n + kBlock - 1) / kBlock;
  if (blocks <= 1) return sum_of_squares_block(x, n);
  std::vector<double> block_sums(static_cast<std::size_t>(blocks));
  for_chunks(
      threads, blocks,
      [&](std::int64_t first, std::int64_t last) {
        for (std::int64_t b = first; b < last; ++b) {
          block_sums[static_cast<std::size_t>(b)] =
              sum_of_squares_block(x + b * kBlock, std::min(kBlock, n - b * kBlock));
        }
      },
      /*align=*/1, /*min_chunk=*/1);
  double total = 0.0;
  for (const double s : block_sums) total += s;
  return total;
}

template <class T>
void scale_cpu(T* __restrict x, std::int64_t n, float alpha) {
  for (std::int64_t i = 0; i < n; ++i) x[i] = from_f32<T>(to_f32(x[i]) * alpha);
}

template <class From, class To>
void cast_cpu(const From* __restrict src, To* __restrict dst, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) dst[i] = from_f32<To>(to_f32(src[i]));
}

}  // namespace

// The dispatchers: CUDA contexts go to kernels/*.cu when built with CUDA, and are a user error
// (a config asking for device = "cuda") otherwise.
#if defined(ZEROLAP_WITH_CUDA)
#define ZL_DISPATCH_CUDA(name, call) return call
#else
#define ZL_DISPATCH_CUDA(name, call) throw_built_without_cuda(name)
#endif

template <class T>
void bias_activation_forward(const ExecContext& ctx, Activation act, const T* x,
                             const NoDeduce<T>* bias, T* y, std::int64_t rows, std::int64_t cols) {
  if (ctx.device == DeviceKind::Cuda) {
    ZL_DISPATCH_CUDA("bias_activation_forward",
                     bias_activation_forward_cuda<T>(ctx, act, x, bias, y, rows, cols));
  }
  check_activation(act, "bias_activation_forward");
  // By rows: each row is computed alone.
  const std::int64_t min_rows =
      std::max<std::int64_t>(1, kMinChunkElements / std::max<std::int64_t>(cols, 1));
  for_chunks(
      ctx.cpu_threads, rows,
      [&](std::int64_t first, std::int64_t last) {
        bias_activation_forward_cpu(act, x + first * cols, bias, y + first * cols, last - first,
                                    cols);
      },
      /*align=*/1, min_rows);
}

template <class T>
void activation_backward(const ExecContext& ctx, Activation act, const T* pre, const T* dy, T* dx,
                         std::int64_t n) {
  if (ctx.device == DeviceKind::Cuda) {
    ZL_DISPATCH_CUDA("activation_backward", activation_backward_cuda<T>(ctx, act, pre, dy, dx, n));
  }
  check_activation(act, "activation_backward");
  for_chunks(ctx.cpu_threads, n, [&](std::int64_t first, std::int64_t last) {
    activation_backward_cpu(act, pre + first, dy + first, dx + first, last - first);
  });
}

template <class T>
void bias_backward(const ExecContext& ctx, const T* dy, float* dbias, std::int64_t rows,
                   std::int64_t cols, Accumulate acc) {
  if (ctx.device == DeviceKind::Cuda) {
    ZL_DISPATCH_CUDA("bias_backward", bias_backward_cuda<T>(ctx, dy, dbias, rows, cols, acc));
  }
  // By columns: each column's sum runs over every row in order, as on one thread.
  const std::int64_t min_cols =
      std::max<std::int64_t>(16, kMinChunkElements / std::max<std::int64_t>(rows, 1));
  for_chunks(
      ctx.cpu_threads, cols,
      [&](std::int64_t first, std::int64_t last) {
        bias_backward_cpu(dy + first, dbias + first, rows, last - first, cols, acc);
      },
      /*align=*/16, min_cols);
}

template <class T>
void add(const ExecContext& ctx, const T* a, const T* b, T* out, std::int64_t n) {
  if (ctx.device == DeviceKind::Cuda) {
    ZL_DISPATCH_CUDA("add", add_cuda<T>(ctx, a, b, out, n));
  }
  for_chunks(ctx.cpu_threads, n, [&](std::int64_t first, std::int64_t last) {
    add_cpu(a + first, b + first, out + first, last - first);
  });
}

template <class T>
void accumulate(const ExecContext& ctx, const T* a, T* out, std::int64_t n, Accumulate acc) {
  if (ctx.device == DeviceKind::Cuda) {
    ZL_DISPATCH_CUDA("accumulate", accumulate_cuda<T>(ctx, a, out, n, acc));
  }
  for_chunks(ctx.cpu_threads, n, [&](std::int64_t first, std::int64_t last) {
    accumulate_cpu(a + first, out + first, last - first, acc);
  });
}

template <class T>
void layernorm_forward(const ExecContext& ctx, const T* x, const T* gamma, const T* beta, T* y,
                       float* mean, float* rstd, std::int64_t rows, std::int64_t cols, float eps) {
  if (ctx.device == DeviceKind::Cuda) {
    ZL_DISPATCH_CUDA("layernorm_forward", layernorm_forward_cuda<T>(ctx, x, gamma, beta, y, mean,
                                                                    rstd, rows, cols, eps));
  }
  layernorm_forward_cpu(x, gamma, beta, y, mean, rstd, rows, cols, eps);
}

template <class T>
void layernorm_backward(const ExecContext& ctx, const T* x, const T* gamma, const float* mean,
                        const float* rstd, const T* dy, T* dx, float* dgamma, float* dbeta,
                        std::int64_t rows, std::int64_t cols, Accumulate acc) {
  if (ctx.device == DeviceKind::Cuda) {
    ZL_DISPATCH_CUDA("layernorm_backward",
                     layernorm_backward_cuda<T>(ctx, x, gamma, mean, rstd, dy, dx, dgamma, dbeta,
                                                rows, cols, acc));
  }
  layernorm_backward_cpu(x, gamma, mean, rstd, dy, dx, dgamma, dbeta, rows, cols, acc);
}

template <class T>
double softmax_cross_entropy(const ExecContext& ctx, const T* logits, const std::int32_t* labels,
                             std::int64_t rows, std::int64_t cols, NoDeduce<T>* dlogits,
                             float grad_scale, std::int64_t* correct) {
  if (ctx.device == DeviceKind::Cuda) {
    ZL_DISPATCH_CUDA("softmax_cross_entropy",
                     softmax_cross_entropy_cuda<T>(ctx, logits, labels, rows, cols, dlogits,
                                                   grad_scale, correct));
  }
  return softmax_cross_entropy_cpu(logits, labels, rows, cols, dlogits, grad_scale, correct);
}

template <class T>
double squared_error(const ExecContext& ctx, const T* pred, const float* target, std::int64_t n,
                     NoDeduce<T>* dpred, float grad_scale) {
  if (ctx.device == DeviceKind::Cuda) {
    ZL_DISPATCH_CUDA("squared_error",
                     squared_error_cuda<T>(ctx, pred, target, n, dpred, grad_scale));
  }
  return squared_error_cpu(pred, target, n, dpred, grad_scale);
}

template <class T>
double sum_of_squares(const ExecContext& ctx, const T* x, std::int64_t n) {
  if (ctx.device == DeviceKind::Cuda) {
    ZL_DISPATCH_CUDA("sum_of_squares", sum_of_squares_cuda<T>(ctx, x, n));
  }
  return sum_of_squares_cpu(ctx.cpu_threads, x, n);
}

template <class T>
void scale(const ExecContext& ctx, T* x, std::int64_t n, float alpha) {
  if (ctx.device == DeviceKind::Cuda) {
    ZL_DISPATCH_CUDA("scale", scale_cuda<T>(ctx, x, n, alpha));
  }
  for_chunks(ctx.cpu_threads, n, [&](std::int64_t first, std::int64_t last) {
    scale_cpu(x + first, last - first, alpha);
  });
}

template <class T>
void softmax_cross_entropy_accumulate(const ExecContext& ctx, const T* logits,
                                      const std::int32_t* labels, std::int64_t rows,
                                      std::int64_t cols, NoDeduce<T>* dlogits, float grad_scale,
                                      double* sums) {
  if (ctx.device == DeviceKind::Cuda) {
    ZL_DISPATCH_CUDA("softmax_cross_entropy_accumulate",
                     softmax_cross_entropy_accumulate_cuda<T>(ctx, logits, labels, rows, cols,
                                                              dlogits, grad_scale, sums));
  }
  if (rows == 0) return;
  std::int64_t correct = 0;
  const double sum =
      softmax_cross_entropy_cpu(logits, labels, rows, cols, dlogits, grad_scale, &correct);
  sums[0] += sum / static_cast<double>(rows);
  sums[1] += static_cast<double>(correct);
}

template <class T>
void squared_error_accumulate(const ExecContext& ctx, const T* pred, const float* target,
                              std::int64_t n, NoDeduce<T>* dpred, float grad_scale, double divisor,
                              double* sums) {
  if (ctx.device == DeviceKind::Cuda) {
    ZL_DISPATCH_CUDA("squared_error_accumulate",
                     squared_error_accumulate_cuda<T>(ctx, pred, target, n, dpred, grad_scale,
                                                      divisor, sums));
  }
  sums[0] += squared_error_cpu(pred, target, n, dpred, grad_scale) / divisor;
}

void take_device_sums(const ExecContext& ctx, double* sums, double* host, int count) {
  if (ctx.device == DeviceKind::Cuda) {
    ZL_DISPATCH_CUDA("take_device_sums", take_device_sums_cuda(ctx, sums, host, count));
  }
  for (int i = 0; i < count; ++i) {
    host[i] = sums[i];
    sums[i] = 0.0;
  }
}

template <class T>
double total_sum_of_squares(const ExecContext& ctx, const ReadSpan<T>* spans, std::int64_t count) {
  if (ctx.device == DeviceKind::Cuda) {
    ZL_DISPATCH_CUDA("total_sum_of_squares", total_sum_of_squares_cuda<T>(ctx, spans, count));
  }
  double total = 0.0;
  for (std::int64_t i = 0; i < count; ++i) {
    total += sum_of_squares_cpu(ctx.cpu_threads, spans[i].data, spans[i].n);
  }
  return total;
}

void zero_fill(const ExecContext& ctx, float* x, std::int64_t n) {
  ZL_CHECK(n >= 0, "zero_fill: negative size {}", n);
  if (ctx.device == DeviceKind::Cuda) {
    ZL_DISPATCH_CUDA("zero_fill", zero_fill_cuda(ctx, x, n));
  }
  std::fill(x, x + n, 0.0f);
}

void cast(const ExecContext& ctx, const float* src, Bf16* dst, std::int64_t n) {
  ZL_CHECK(n >= 0, "cast: negative size {}", n);
  if (ctx.device == DeviceKind::Cuda) {
    ZL_DISPATCH_CUDA("cast", cast_cuda(ctx, src, dst, n));
  }
  for_chunks(ctx.cpu_threads, n, [&](std::int64_t first, std::int64_t last) {
    cast_cpu(src + first, dst + first, last - first);
  });
}

void cast(const ExecContext& ctx, const Bf16* src, float* dst, std::int64_t n) {
  ZL_CHECK(n >= 0, "cast: negative size {}", n);
  if (ctx.device == DeviceKind::Cuda) {
    ZL_DISPATCH_CUDA("cast", cast_cuda(ctx, src, dst, n));
  }
  for_chunks(ctx.cpu_threads, n, [&](std::int64_t first, std::int64_t last) {
    cast_cpu(src + first, dst + first, last - first);
  });
}

#undef ZL_DISPATCH_CUDA

// The instances: fp32 and bf16 storage.
#define ZL_ELEMENTWISE_INSTANCES(T)                                                              \
  template void bias_activation_forward<T>(const ExecContext&, Activation, const T*, const T*,   \
                                           T*, std::int64_t, std::int64_t);                      \
  template void activation_backward<T>(const ExecContext&, Activation, const T*, const T*, T*,   \
                                       std::int64_t);                                            \
  template void bias_backward<T>(const ExecContext&, const T*, float*, std::int64_t,             \
                                 std::int64_t, Accumulate);                                      \
  template void add<T>(const ExecContext&, const T*, const T*, T*, std::int64_t);               \
  template void accumulate<T>(const ExecContext&, const T*, T*, std::int64_t, Accumulate);      \
  template void layernorm_forward<T>(const ExecContext&, const T*, const T*, const T*, T*,       \
                                     float*, float*, std::int64_t, std::int64_t, float);         \
  template void layernorm_backward<T>(const ExecContext&, const T*, const T*, const float*,      \
                                      const float*, const T*, T*, float*, float*, std::int64_t,  \
                                      std::int64_t, Accumulate);                                 \
  template double softmax_cross_entropy<T>(const ExecContext&, const T*, const std::int32_t*,   \
                                           std::int64_t, std::int64_t, T*, float,               \
                                           std::int64_t*);                                       \
  template double squared_error<T>(const ExecContext&, const T*, const float*, std::int64_t, T*, \
                                   float);                                                       \
  template double sum_of_squares<T>(const ExecContext&, const T*, std::int64_t);                \
  template void scale<T>(const ExecContext&, T*, std::int64_t, float);                          \
  template void softmax_cross_entropy_accumulate<T>(const ExecContext&, const T*,                \
                                                    const std::int32_t*, std::int64_t,           \
                                                    std::int64_t, T*, float, double*);           \
  template void squared_error_accumulate<T>(const ExecContext&, const T*, const float*,          \
                                            std::int64_t, T*, float, double, double*);           \
  template double total_sum_of_squares<T>(const ExecContext&, const ReadSpan<T>*, std::int64_t);

ZL_ELEMENTWISE_INSTANCES(float)
ZL_ELEMENTWISE_INSTANCES(Bf16)
#undef ZL_ELEMENTWISE_INSTANCES

}  // namespace zl
