// CUDA implementations of the kernels/elementwise.h functions that return nothing: activations,
// bias gradient, add/accumulate/scale, LayerNorm. Enqueued on ctx.stream, never synchronising; the
// formulas mirror kernels/elementwise.cpp (same constants, same double accumulations). Column sums
// combine values in an order fixed by the shapes alone, without float atomics, so results are
// bitwise reproducible run to run. The losses and sum_of_squares are in elementwise_reductions.cu.
// Every kernel is a template on the storage type T (float or Bf16): loads go through to_f32 and
// stores through from_f32<T> (base/bf16.h), the identity for float, so the fp32 instances are the
// fp32 kernels as they were; arithmetic and sums stay fp32/double for both.
#include <algorithm>
#include <cstdint>

#include "base/bf16.h"
#include "base/errors.h"
#include "kernels/cuda_common.cuh"
#include "kernels/cuda_kernels.h"

namespace zl {
namespace {

using cuda_detail::check_size;
using cuda_detail::global_thread;
using cuda_detail::grid_for;
using cuda_detail::grid_for_rows;
using cuda_detail::grid_threads;
using cuda_detail::kThreads;
using cuda_detail::kWarpSize;
using cuda_detail::kWarpsPerBlock;
using cuda_detail::StreamScratch;
using cuda_detail::stream_of;
using cuda_detail::SumOp;
using cuda_detail::warp_reduce;

// --- activations ------------------------------------------------------------------------------

// GELU, tanh approximation, with PyTorch's constants: the same as the CPU's GeluOp.
constexpr float kGeluBeta = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluKappa = 0.044715f;

__device__ __forceinline__ float activate(Activation act, float v) {
  switch (act) {
    case Activation::Identity: return v;
    case Activation::Relu: return v < 0.0f ? 0.0f : v;  // keeps NaN, as std::max(v, 0) and torch
    case Activation::Gelu: {
      const float inner = kGeluBeta * (v + kGeluKappa * v * v * v);
      return 0.5f * v * (1.0f + tanhf(inner));
    }
    case Activation::Tanh: return tanhf(v);
  }
  return v;
}

// dy * act'(v), as the CPU computes it: ReLU selects dy (a NaN dy where v <= 0 gives 0, not NaN).
__device__ __forceinline__ float activation_grad(Activation act, float v, float dy) {
  switch (act) {
    case Activation::Identity: return dy;
    case Activation::Relu: return v > 0.0f ? dy : 0.0f;  // 0 at v == 0, as threshold_backward
    case Activation::Gelu: {
      const float v2 = v * v;
      const float t = tanhf(kGeluBeta * (v + kGeluKappa * v2 * v));
      const float left_derivative = 0.5f * (1.0f + t);
      const float right_derivative =
          0.5f * v * (1.0f - t * t) * kGeluBeta * (1.0f + 3.0f * kGeluKappa * v2);
      return dy * (left_derivative + right_derivative);
    }
    case Activation::Tanh: {
      const float t = tanhf(v);
      return dy * (1.0f - t * t);
    }
  }
  return dy;
}

// y (rows, cols) = act(x + bias[cols]); `act` is uniform over the grid, so the switch does not
// diverge. x and y may alias: each element is read, then written, by one thread.
template <class T>
__global__ void bias_activation_kernel(Activation act, const T* x, const T* bias, T* y,
                                       std::int64_t n, std::int64_t cols) {
  for (std::int64_t i = global_thread(); i < n; i += grid_threads()) {
    const float b = bias != nullptr ? to_f32(bias[i % cols]) : 0.0f;
    const float v = to_f32(x[i]);
    y[i] = from_f32<T>(activate(act, bias != nullptr ? v + b : v));
  }
}

// dx (n) = dy * act'(pre); dx may alias dy.
template <class T>
__global__ void activation_backward_kernel(Activation act, const T* pre, const T* dy, T* dx,
                                           std::int64_t n) {
  for (std::int64_t i = global_thread(); i < n; i += grid_threads()) {
    dx[i] = from_f32<T>(
        activation_grad(act, act == Activation::Identity ? 0.0f : to_f32(pre[i]), to_f32(dy[i])));
  }
}

// --- element-wise -----------------------------------------------------------------------------

// out (n) = a + b; out may alias a or b.
template <class T>
__global__ void add_kernel(const T* a, const T* b, T* out, std::int64_t n) {
  for (std::int64_t i = global_thread(); i < n; i += grid_threads()) {
    out[i] = from_f32<T>(to_f32(a[i]) + to_f32(b[i]));
  }
}

// out (n) += a.
template <class T>
__global__ void accumulate_add_kernel(const T* a, T* out, std::int64_t n) {
  for (std::int64_t i = global_thread(); i < n; i += grid_threads()) {
    out[i] = from_f32<T>(to_f32(out[i]) + to_f32(a[i]));
  }
}

// x (n) *= alpha.
template <class T>
__global__ void scale_kernel(T* x, std::int64_t n, float alpha) {
  for (std::int64_t i = global_thread(); i < n; i += grid_threads()) {
    x[i] = from_f32<T>(to_f32(x[i]) * alpha);
  }
}

// dst (n) = src, converted.
template <class From, class To>
__global__ void cast_kernel(const From* src, To* dst, std::int64_t n) {
  for (std::int64_t i = global_thread(); i < n; i += grid_threads()) {
    dst[i] = from_f32<To>(to_f32(src[i]));
  }
}

// --- deterministic column sums (bias and LayerNorm parameter gradients) -------------------------
// Note [Column sums]: a block covers kColTile adjacent columns (coalesced row segments) and one
// chunk of at most kRowsPerChunk rows; its kRowLanes thread rows sum every kRowLanes-th row of the
// chunk, then thread row 0 adds the kRowLanes partials in order. With one chunk the result goes
// straight to the destination; with several, each chunk writes a partial (chunk, kN, cols) to
// scratch and a second kernel adds the chunks in order. The combination order depends only on
// (rows, cols): reproducible, no atomics.

constexpr int kColTile = 32;
constexpr int kRowLanes = kThreads / kColTile;  // 8
constexpr std::int64_t kRowsPerChunk = 512;
constexpr std::int64_t kMaxChunks = 65535;  // gridDim.y limit

template <int kN>
struct ColumnTerms {
  float v[kN];
};

// The destinations of kN column sums: dst[k] (cols) =/+= sum.
template <int kN>
struct ColumnOut {
  float* dst[kN];
  bool add;
};

// bias_backward's source: dy (rows, cols).
template <class T>
struct DyColumns {
  static constexpr int kN = 1;
  const T* dy;
  std::int64_t cols;
  __device__ ColumnTerms<1> operator()(std::int64_t r, std::int64_t c) const {
    return {{to_f32(dy[r * cols + c])}};
  }
};

// layernorm_backward's sources: dgamma terms dy * xhat and dbeta terms dy.
template <class T>
struct LayerNormParamColumns {
  static constexpr int kN = 2;
  const T* x;
  const T* dy;
  const float* mean;
  const float* rstd;
  std::int64_t cols;
  __device__ ColumnTerms<2> operator()(std::int64_t r, std::int64_t c) const {
    const std::int64_t i = r * cols + c;
    const float xhat = (to_f32(x[i]) - mean[r]) * rstd[r];
    const float d = to_f32(dy[i]);
    return {{d * xhat, d}};
  }
};

// Grid (ceil(cols / kColTile), chunks), block (kColTile, kRowLanes). partial: (chunks, kN, cols)
// when chunks > 1, else null and the sums go to `out`.
template <class Source>
__global__ void column_sums_kernel(Source src, std::int64_t rows, std::int64_t cols,
                                   std::int64_t rows_per_chunk, float* partial,
                                   ColumnOut<Source::kN> out) {
  constexpr int kN = Source::kN;
  __shared__ float lanes[kN][kRowLanes][kColTile];
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * kColTile + threadIdx.x;
  const std::int64_t r_begin = static_cast<std::int64_t>(blockIdx.y) * rows_per_chunk;
  const std::int64_t r_end = std::min(rows, r_begin + rows_per_chunk);
  float acc[kN] = {};
  if (c < cols) {
    for (std::int64_t r = r_begin + threadIdx.y; r < r_end; r += kRowLanes) {
      const ColumnTerms<kN> t = src(r, c);
      for (int k = 0; k < kN; ++k) acc[k] += t.v[k];
    }
  }
  for (int k = 0; k < kN; ++k) lanes[k][threadIdx.y][threadIdx.x] = acc[k];
  __syncthreads();
  if (threadIdx.y != 0 || c >= cols) return;
  for (int k = 0; k < kN; ++k) {
    float sum = lanes[k][0][threadIdx.x];
    for (int y = 1; y < kRowLanes; ++y) sum += lanes[k][y][threadIdx.x];
    if (partial != nullptr) {
      partial[(static_cast<std::int64_t>(blockIdx.y) * kN + k) * cols + c] = sum;
    } else {
      out.dst[k][c] = out.add ? out.dst[k][c] + sum : sum;
    }
  }
}

// out.dst[k] (cols) =/+= sum over chunks of partial (chunks, kN, cols), chunks in order.
template <int kN>
__global__ void column_chunks_kernel(const float* partial, std::int64_t chunks, std::int64_t cols,
                                     ColumnOut<kN> out) {
  for (std::int64_t i = global_thread(); i < kN * cols; i += grid_threads()) {
    const std::int64_t k = i / cols;
    const std::int64_t c = i % cols;
    float sum = 0.0f;
    for (std::int64_t chunk = 0; chunk < chunks; ++chunk) {
      sum += partial[(chunk * kN + k) * cols + c];
    }
    out.dst[k][c] = out.add ? out.dst[k][c] + sum : sum;
  }
}

// Launches Note [Column sums] for rows > 0, cols > 0.
template <class Source>
void launch_column_sums(cudaStream_t stream, const Source& src, std::int64_t rows,
                        std::int64_t cols, ColumnOut<Source::kN> out) {
  constexpr int kN = Source::kN;
  const std::int64_t rows_per_chunk =
      std::max(kRowsPerChunk, (rows + kMaxChunks - 1) / kMaxChunks);
  const std::int64_t chunks = (rows + rows_per_chunk - 1) / rows_per_chunk;
  const std::int64_t col_tiles = (cols + kColTile - 1) / kColTile;
  ZL_CHECK(col_tiles <= 0x7fffffff, "column sums: cols = {} too large", cols);
  const dim3 grid(static_cast<unsigned>(col_tiles), static_cast<unsigned>(chunks));
  const dim3 block(kColTile, kRowLanes);
  if (chunks == 1) {
    column_sums_kernel<<<grid, block, 0, stream>>>(src, rows, cols, rows_per_chunk, nullptr, out);
    ZL_CUDA_CHECK(cudaGetLastError());
    return;
  }
  StreamScratch partial(stream, sizeof(float) * static_cast<std::size_t>(chunks * kN * cols));
  column_sums_kernel<<<grid, block, 0, stream>>>(src, rows, cols, rows_per_chunk,
                                                 partial.as<float>(), out);
  ZL_CUDA_CHECK(cudaGetLastError());
  column_chunks_kernel<kN><<<grid_for(kN * cols), kThreads, 0, stream>>>(partial.as<float>(),
                                                                         chunks, cols, out);
  ZL_CUDA_CHECK(cudaGetLastError());
}

// --- LayerNorm: one warp per row, sums in double as on the CPU -------------------------------

// y (rows, cols) = (x - mean) * rstd * gamma + beta; mean, rstd (rows) =.
template <class T>
__global__ void layernorm_forward_kernel(const T* x, const T* gamma, const T* beta, T* y,
                                         float* mean, float* rstd, std::int64_t rows,
                                         std::int64_t cols, float eps) {
  const int lane = threadIdx.x % kWarpSize;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * kWarpsPerBlock;
  for (std::int64_t row = global_thread() / kWarpSize; row < rows; row += warps) {
    const T* xr = x + row * cols;
    double sum = 0.0;
    for (std::int64_t j = lane; j < cols; j += kWarpSize) sum += to_f32(xr[j]);
    const double mu = warp_reduce(sum, SumOp{}) / static_cast<double>(cols);
    double sq = 0.0;
    for (std::int64_t j = lane; j < cols; j += kWarpSize) {
      const double d = to_f32(xr[j]) - mu;
      sq += d * d;
    }
    const double var = warp_reduce(sq, SumOp{}) / static_cast<double>(cols);
    const float mu_f = static_cast<float>(mu);
    const float rs_f = static_cast<float>(1.0 / sqrt(var + static_cast<double>(eps)));
    if (lane == 0) {
      mean[row] = mu_f;
      rstd[row] = rs_f;
    }
    // y may alias x: every lane has finished reading the row (the reductions above), and each
    // lane writes only the columns it read.
    __syncwarp();
    T* yr = y + row * cols;
    for (std::int64_t j = lane; j < cols; j += kWarpSize) {
      yr[j] = from_f32<T>((to_f32(xr[j]) - mu_f) * rs_f * to_f32(gamma[j]) + to_f32(beta[j]));
    }
  }
}

// dx (rows, cols) = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma,
// xhat = (x - mean) * rstd. dx may alias dy (each lane reads its columns before writing them).
template <class T>
__global__ void layernorm_dx_kernel(const T* x, const T* gamma, const float* mean,
                                    const float* rstd, const T* dy, T* dx, std::int64_t rows,
                                    std::int64_t cols) {
  const int lane = threadIdx.x % kWarpSize;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * kWarpsPerBlock;
  for (std::int64_t row = global_thread() / kWarpSize; row < rows; row += warps) {
    const T* xr = x + row * cols;
    const T* dyr = dy + row * cols;
    const float mu = mean[row];
    const float rs = rstd[row];
    double sum_g = 0.0;
    double sum_g_xhat = 0.0;
    for (std::int64_t j = lane; j < cols; j += kWarpSize) {
      const float xhat = (to_f32(xr[j]) - mu) * rs;
      const float g = to_f32(dyr[j]) * to_f32(gamma[j]);
      sum_g += g;
      sum_g_xhat += static_cast<double>(g) * xhat;
    }
    const float mean_g =
        static_cast<float>(warp_reduce(sum_g, SumOp{}) / static_cast<double>(cols));
    const float mean_g_xhat =
        static_cast<float>(warp_reduce(sum_g_xhat, SumOp{}) / static_cast<double>(cols));
    __syncwarp();
    T* dxr = dx + row * cols;
    for (std::int64_t j = lane; j < cols; j += kWarpSize) {
      const float xhat = (to_f32(xr[j]) - mu) * rs;
      // __fmul_rn keeps nvcc from fusing the products into the subtractions: g - mean(g) cancels
      // (exactly, for cols == 1), and a fused product would leave its rounding error there, to be
      // amplified by rstd. Rounded products give the CPU's result.
      dxr[j] = from_f32<T>(rs * (__fmul_rn(to_f32(dyr[j]), to_f32(gamma[j])) - mean_g -
                                 __fmul_rn(xhat, mean_g_xhat)));
    }
  }
}

}  // namespace

// y (rows, cols) = act(x + bias (cols)); bias may be null; x and y may alias.
template <class T>
void bias_activation_forward_cuda(const ExecContext& ctx, Activation act, const T* x,
                                  const T* bias, T* y, std::int64_t rows, std::int64_t cols) {
  check_size(rows, "bias_activation_forward_cuda");
  check_size(cols, "bias_activation_forward_cuda");
  const std::int64_t n = rows * cols;
  if (n == 0) return;
  bias_activation_kernel<<<grid_for(n), kThreads, 0, stream_of(ctx)>>>(act, x, bias, y, n, cols);
  ZL_CUDA_CHECK(cudaGetLastError());
}

// dx (n) = dy (n) * act'(pre (n)); dx may alias dy.
template <class T>
void activation_backward_cuda(const ExecContext& ctx, Activation act, const T* pre, const T* dy,
                              T* dx, std::int64_t n) {
  check_size(n, "activation_backward_cuda");
  if (n == 0) return;
  activation_backward_kernel<<<grid_for(n), kThreads, 0, stream_of(ctx)>>>(act, pre, dy, dx, n);
  ZL_CUDA_CHECK(cudaGetLastError());
}

// dbias (cols) =/+= column sums of dy (rows, cols); Note [Column sums].
template <class T>
void bias_backward_cuda(const ExecContext& ctx, const T* dy, float* dbias, std::int64_t rows,
                        std::int64_t cols, Accumulate acc) {
  check_size(rows, "bias_backward_cuda");
  check_size(cols, "bias_backward_cuda");
  if (cols == 0) return;
  const cudaStream_t stream = stream_of(ctx);
  if (rows == 0) {
    // No rows: the sum is zero; "=" still has to clear dbias.
    if (acc == Accumulate::Overwrite) {
      const std::size_t bytes = sizeof(float) * static_cast<std::size_t>(cols);
      ZL_CUDA_CHECK(cudaMemsetAsync(dbias, 0, bytes, stream));
    }
    return;
  }
  launch_column_sums(stream, DyColumns<T>{dy, cols}, rows, cols,
                     ColumnOut<1>{{dbias}, acc == Accumulate::Add});
}

// out (n) = a (n) + b (n); out may alias a or b.
template <class T>
void add_cuda(const ExecContext& ctx, const T* a, const T* b, T* out, std::int64_t n) {
  check_size(n, "add_cuda");
  if (n == 0) return;
  add_kernel<<<grid_for(n), kThreads, 0, stream_of(ctx)>>>(a, b, out, n);
  ZL_CUDA_CHECK(cudaGetLastError());
}

// out (n) =/+= a (n).
template <class T>
void accumulate_cuda(const ExecContext& ctx, const T* a, T* out, std::int64_t n, Accumulate acc) {
  check_size(n, "accumulate_cuda");
  if (n == 0) return;
  const cudaStream_t stream = stream_of(ctx);
  if (acc == Accumulate::Overwrite) {
    if (out != a) {
      ZL_CUDA_CHECK(cudaMemcpyAsync(out, a, sizeof(T) * static_cast<std::size_t>(n),
                                    cudaMemcpyDeviceToDevice, stream));
    }
    return;
  }
  accumulate_add_kernel<<<grid_for(n), kThreads, 0, stream>>>(a, out, n);
  ZL_CUDA_CHECK(cudaGetLastError());
}

// y (rows, cols) = LayerNorm(x) * gamma (cols) + beta (cols); mean, rstd (rows) =.
template <class T>
void layernorm_forward_cuda(const ExecContext& ctx, const T* x, const T* gamma, const T* beta,
                            T* y, float* mean, float* rstd, std::int64_t rows, std::int64_t cols,
                            float eps) {
  check_size(rows, "layernorm_forward_cuda");
  check_size(cols, "layernorm_forward_cuda");
  if (rows == 0) return;
  ZL_CHECK(cols > 0, "layernorm_forward: cols = 0 with rows = {}", rows);
  layernorm_forward_kernel<<<grid_for_rows(rows), kThreads, 0, stream_of(ctx)>>>(
      x, gamma, beta, y, mean, rstd, rows, cols, eps);
  ZL_CUDA_CHECK(cudaGetLastError());
}

// dx (rows, cols) =; dgamma, dbeta (cols) =/+= column sums of dy * xhat and dy.
// The column sums run first: they read dy, which dx may alias.
template <class T>
void layernorm_backward_cuda(const ExecContext& ctx, const T* x, const T* gamma,
                             const float* mean, const float* rstd, const T* dy, T* dx,
                             float* dgamma, float* dbeta, std::int64_t rows, std::int64_t cols,
                             Accumulate acc) {
  check_size(rows, "layernorm_backward_cuda");
  check_size(cols, "layernorm_backward_cuda");
  if (cols == 0) return;
  const cudaStream_t stream = stream_of(ctx);
  if (rows == 0) {
    if (acc == Accumulate::Overwrite) {
      const std::size_t bytes = sizeof(float) * static_cast<std::size_t>(cols);
      ZL_CUDA_CHECK(cudaMemsetAsync(dgamma, 0, bytes, stream));
      ZL_CUDA_CHECK(cudaMemsetAsync(dbeta, 0, bytes, stream));
    }
    return;
  }
  launch_column_sums(stream, LayerNormParamColumns<T>{x, dy, mean, rstd, cols}, rows, cols,
                     ColumnOut<2>{{dgamma, dbeta}, acc == Accumulate::Add});
  layernorm_dx_kernel<<<grid_for_rows(rows), kThreads, 0, stream>>>(x, gamma, mean, rstd, dy, dx,
                                                                    rows, cols);
  ZL_CUDA_CHECK(cudaGetLastError());
}

// x (n) *= alpha.
template <class T>
void scale_cuda(const ExecContext& ctx, T* x, std::int64_t n, float alpha) {
  check_size(n, "scale_cuda");
  if (n == 0) return;
  scale_kernel<<<grid_for(n), kThreads, 0, stream_of(ctx)>>>(x, n, alpha);
  ZL_CUDA_CHECK(cudaGetLastError());
}

// x (n) = +0.0, stream-ordered.
void zero_fill_cuda(const ExecContext& ctx, float* x, std::int64_t n) {
  check_size(n, "zero_fill_cuda");
  if (n == 0) return;
  ZL_CUDA_CHECK(cudaMemsetAsync(x, 0, sizeof(float) * static_cast<std::size_t>(n), stream_of(ctx)));
}

namespace {
template <class From, class To>
void launch_cast(const ExecContext& ctx, const From* src, To* dst, std::int64_t n) {
  check_size(n, "cast_cuda");
  if (n == 0) return;
  cast_kernel<<<grid_for(n), kThreads, 0, stream_of(ctx)>>>(src, dst, n);
  ZL_CUDA_CHECK(cudaGetLastError());
}
}  // namespace

// dst (n) = src converted (fp32 -> bf16 to nearest even; bf16 -> fp32 exact).
void cast_cuda(const ExecContext& ctx, const float* src, Bf16* dst, std::int64_t n) {
  launch_cast(ctx, src, dst, n);
}
void cast_cuda(const ExecContext& ctx, const Bf16* src, float* dst, std::int64_t n) {
  launch_cast(ctx, src, dst, n);
}

#define ZL_ELEMENTWISE_CUDA_INSTANCES(T)                                                         \
  template void bias_activation_forward_cuda<T>(const ExecContext&, Activation, const T*,        \
                                                const T*, T*, std::int64_t, std::int64_t);       \
  template void activation_backward_cuda<T>(const ExecContext&, Activation, const T*, const T*,  \
                                            T*, std::int64_t);                                   \
  template void bias_backward_cuda<T>(const ExecContext&, const T*, float*, std::int64_t,        \
                                      std::int64_t, Accumulate);                                 \
  template void add_cuda<T>(const ExecContext&, const T*, const T*, T*, std::int64_t);          \
  template void accumulate_cuda<T>(const ExecContext&, const T*, T*, std::int64_t, Accumulate); \
  template void layernorm_forward_cuda<T>(const ExecContext&, const T*, const T*, const T*, T*,  \
                                          float*, float*, std::int64_t, std::int64_t, float);    \
  template void layernorm_backward_cuda<T>(const ExecContext&, const T*, const T*,               \
                                           const float*, const float*, const T*, T*, float*,     \
                                           float*, std::int64_t, std::int64_t, Accumulate);      \
  template void scale_cuda<T>(const ExecContext&, T*, std::int64_t, float);

ZL_ELEMENTWISE_CUDA_INSTANCES(float)
ZL_ELEMENTWISE_CUDA_INSTANCES(Bf16)
#undef ZL_ELEMENTWISE_CUDA_INSTANCES

}  // namespace zl
