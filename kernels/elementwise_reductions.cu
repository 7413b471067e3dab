// CUDA implementations of the kernels/elementwise.h reductions: softmax cross-entropy, squared
// error and sum of squares that return a host value, and their variants that add into device sums
// read back later (take_device_sums). Each writes per-row or per-block partials to
// stream-ordered scratch, adds them in one block in an order fixed by the sizes alone (no atomics:
// bitwise reproducible run to run), copies the scalars to the host and synchronises ctx.stream,
// as the contract of a host return value requires. Formulas mirror kernels/elementwise.cpp.
// Templates on the storage type T (float or Bf16) as in elementwise.cu; sums are double for both.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include <fmt/format.h>

#include "base/bf16.h"
#include "base/errors.h"
#include "kernels/cuda_common.cuh"
#include "kernels/cuda_kernels.h"
#include "base/poll.h"

namespace zl {
namespace {

using cuda_detail::block_reduce;
using cuda_detail::check_size;
using cuda_detail::global_thread;
using cuda_detail::grid_for_rows;
using cuda_detail::grid_threads;
using cuda_detail::kThreads;
using cuda_detail::kWarpSize;
using cuda_detail::kWarpsPerBlock;
using cuda_detail::MinOp;
using cuda_detail::StreamScratch;
using cuda_detail::stream_of;
using cuda_detail::SumOp;
using cuda_detail::warp_reduce;

struct RowResult {
  double loss;
  int correct;  // 1 when the first maximal logit is the label's
  int bad;      // 1 when the label is outside [0, cols): the row is left untouched
};

struct LossTotals {
  double loss;
  long long correct;
  long long first_bad_row;  // rows when every label is valid
};

// One warp per row of logits (rows, cols): rows_out (rows) = loss, argmax check; if dlogits:
// dlogits (rows, cols) = (softmax - onehot) * grad_scale (same float steps as the CPU).
template <class T>
__global__ void softmax_cross_entropy_rows_kernel(const T* logits, const std::int32_t* labels,
                                                  std::int64_t rows, std::int64_t cols,
                                                  T* dlogits, float grad_scale,
                                                  RowResult* rows_out) {
  const int lane = threadIdx.x % kWarpSize;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * kWarpsPerBlock;
  for (std::int64_t row = global_thread() / kWarpSize; row < rows; row += warps) {
    const std::int32_t label = labels[row];
    if (label < 0 || label >= cols) {
      if (lane == 0) rows_out[row] = RowResult{0.0, 0, 1};
      continue;
    }
    const T* xr = logits + row * cols;
    // Read before any lane writes dlogits, which may alias logits (see the __syncwarp below).
    const float label_logit = to_f32(xr[label]);
    // argmax: each lane keeps its first maximum (strict >, increasing j), then the warp keeps the
    // larger value and, on ties, the smaller index: the first maximal index, as torch.argmax.
    float max_v = to_f32(xr[lane < cols ? lane : 0]);
    std::int64_t argmax = lane < cols ? lane : 0;
    for (std::int64_t j = lane + kWarpSize; j < cols; j += kWarpSize) {
      const float v = to_f32(xr[j]);
      if (v > max_v) {
        max_v = v;
        argmax = j;
      }
    }
    for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
      const float other_v = __shfl_xor_sync(0xffffffffu, max_v, offset);
      const std::int64_t other_j = __shfl_xor_sync(0xffffffffu, argmax, offset);
      if (other_v > max_v || (other_v == max_v && other_j < argmax)) {
        max_v = other_v;
        argmax = other_j;
      }
    }
    double sum_exp = 0.0;
    for (std::int64_t j = lane; j < cols; j += kWarpSize) sum_exp += expf(to_f32(xr[j]) - max_v);
    sum_exp = warp_reduce(sum_exp, SumOp{});
    if (lane == 0) {
      const double loss = log(sum_exp) - (static_cast<double>(label_logit) - max_v);
      rows_out[row] = RowResult{loss, argmax == label ? 1 : 0, 0};
    }
    if (dlogits != nullptr) {
      __syncwarp();  // every lane's reads of the row (label_logit included) precede any write
      const float norm_scale = static_cast<float>(static_cast<double>(grad_scale) / sum_exp);
      T* dr = dlogits + row * cols;
      for (std::int64_t j = lane; j < cols; j += kWarpSize) {
        float d = expf(to_f32(xr[j]) - max_v) * norm_scale;
        if (j == label) d -= grad_scale;
        dr[j] = from_f32<T>(d);
      }
    }
  }
}

// One block: totals = sums of rows_in (rows) in a fixed order.
__global__ void loss_totals_kernel(const RowResult* rows_in, std::int64_t rows,
                                   LossTotals* totals) {
  __shared__ double shared_d[kWarpsPerBlock];
  __shared__ long long shared_i[kWarpsPerBlock];
  double loss = 0.0;
  long long correct = 0;
  long long first_bad = rows;
  for (std::int64_t i = threadIdx.x; i < rows; i += blockDim.x) {
    const RowResult r = rows_in[i];
    loss += r.loss;
    correct += r.correct;
    if (r.bad != 0 && i < first_bad) first_bad = i;
  }
  loss = block_reduce(loss, 0.0, shared_d, SumOp{});
  correct = block_reduce(correct, 0LL, shared_i, SumOp{});
  first_bad = block_reduce(first_bad, static_cast<long long>(rows), shared_i, MinOp{});
  if (threadIdx.x == 0) *totals = LossTotals{loss, correct, first_bad};
}

// Blocks of the first pass of a sum over n elements: a function of n only (never of the device),
// so the combination order is the same on every GPU and run.
constexpr std::int64_t kMaxSumBlocks = 1024;
unsigned sum_blocks(std::int64_t n) {
  return static_cast<unsigned>(std::min(kMaxSumBlocks, (n + kThreads - 1) / kThreads));
}

// partial (gridDim.x) = per-block sums of term(i) over i < n, in double.
template <class Term>
__global__ void partial_sums_kernel(Term term, std::int64_t n, double* partial) {
  __shared__ double shared[kWarpsPerBlock];
  double acc = 0.0;
  for (std::int64_t i = global_thread(); i < n; i += grid_threads()) acc += term(i);
  acc = block_reduce(acc, 0.0, shared, SumOp{});
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

// One block: *total = sum of partial (count), in a fixed order.
__global__ void finish_sum_kernel(const double* partial, std::int64_t count, double* total) {
  __shared__ double shared[kWarpsPerBlock];
  double acc = 0.0;
  for (std::int64_t i = threadIdx.x; i < count; i += blockDim.x) acc += partial[i];
  acc = block_reduce(acc, 0.0, shared, SumOp{});
  if (threadIdx.x == 0) *total = acc;
}

template <class T>
struct SquareTerm {
  const T* x;
  __device__ double operator()(std::int64_t i) const {
    const double v = to_f32(x[i]);
    return v * v;
  }
};

// (pred - target)^2 in double; also dpred (n) = 2 * grad_scale * (pred - target) when dpred is not
// null. dpred may alias pred or target: each element is read, then written, by one thread.
template <class T>
struct SquaredErrorTerm {
  const T* pred;
  const float* target;
  T* dpred;
  float two_scale;
  __device__ double operator()(std::int64_t i) const {
    const float p = to_f32(pred[i]);
    const float t = target[i];
    const double d = static_cast<double>(p) - t;
    if (dpred != nullptr) dpred[i] = from_f32<T>(two_scale * (p - t));
    return d * d;
  }
};

// One block: sums[0] += (sum of row losses) / rows, sums[1] += correct rows, sums[2] += rows with
// a bad label (kLossSumCount doubles). One thread adds, in stream order: reproducible.
__global__ void loss_accumulate_kernel(const RowResult* rows_in, std::int64_t rows, double* sums) {
  __shared__ double shared_d[kWarpsPerBlock];
  __shared__ long long shared_i[kWarpsPerBlock];
  double loss = 0.0;
  long long correct = 0;
  long long bad = 0;
  for (std::int64_t i = threadIdx.x; i < rows; i += blockDim.x) {
    const RowResult r = rows_in[i];
    loss += r.loss;
    correct += r.correct;
    bad += r.bad;
  }
  loss = block_reduce(loss, 0.0, shared_d, SumOp{});
  correct = block_reduce(correct, 0LL, shared_i, SumOp{});
  bad = block_reduce(bad, 0LL, shared_i, SumOp{});
  if (threadIdx.x == 0) {
    sums[0] += loss / static_cast<double>(rows);
    sums[1] += static_cast<double>(correct);
    sums[2] += static_cast<double>(bad);
  }
}

// One block: *sum += (sum of partial (count), in a fixed order) / divisor.
__global__ void finish_sum_accumulate_kernel(const double* partial, std::int64_t count,
                                             double divisor, double* sum) {
  __shared__ double shared[kWarpsPerBlock];
  double acc = 0.0;
  for (std::int64_t i = threadIdx.x; i < count; i += blockDim.x) acc += partial[i];
  acc = block_reduce(acc, 0.0, shared, SumOp{});
  if (threadIdx.x == 0) *sum += acc / divisor;
}

// One thread: *total = values[0] + values[1] + ... in index order (as a host loop would add them).
__global__ void ordered_sum_kernel(const double* values, std::int64_t count, double* total) {
  double acc = 0.0;
  for (std::int64_t i = 0; i < count; ++i) acc += values[i];
  *total = acc;
}

// Note [Host read-backs]: a reduction that returns a value to the host copies it into a small
// pinned block of the calling thread, then waits for the stream by polling an event (poll_until)
// when ctx.host_wait_timeout_s > 0. Both matter for a stream stuck behind a collective a dead peer
// never joins: a copy into pageable memory would itself block inside cudaMemcpyAsync until the
// stream reached it, and cudaStreamSynchronize has no timeout. The block is never freed
// (cudaFreeHost synchronises the device), so a copy still pending after a timeout writes into live
// memory while the job is being ended; and after a timeout the thread abandons it for a fresh one,
// so a late copy cannot land on a later read-back.
constexpr std::size_t kReadBackBytes = 64;
thread_local void* t_read_back_block = nullptr;

void* read_back_block() {
  if (t_read_back_block == nullptr) {
    ZL_CUDA_CHECK(cudaMallocHost(&t_read_back_block, kReadBackBytes));
  }
  return t_read_back_block;
}

// Waits on the host until everything enqueued on ctx.stream so far has run (Note [Host
// read-backs]); `what` names the reduction in the timeout error.
void wait_for_stream(const ExecContext& ctx, const char* what) {
  const cudaStream_t stream = stream_of(ctx);
  if (ctx.host_wait_timeout_s <= 0.0) {
    ZL_CUDA_CHECK(cudaStreamSynchronize(stream));
    return;
  }
  cudaEvent_t reached = nullptr;
  ZL_CUDA_CHECK(cudaEventCreateWithFlags(&reached, cudaEventDisableTiming));
  struct EventGuard {
    cudaEvent_t event;
    ~EventGuard() { cudaEventDestroy(event); }
  } guard{reached};
  ZL_CUDA_CHECK(cudaEventRecord(reached, stream));
  try {
    poll_until(
        [&] {
          const cudaError_t state = cudaEventQuery(reached);
          if (state == cudaErrorNotReady) return false;
          ZL_CUDA_CHECK(state);
          return true;
        },
        ctx.host_wait_timeout_s,
        [&] {
          return fmt::format(
              "{}: the GPU's compute stream did not finish within runtime.timeout_s = {} s (it "
              "waits for collectives: a peer rank died, hangs, or issued collectives in another "
              "order)",
              what, ctx.host_wait_timeout_s);
        });
  } catch (const RuntimeFailure&) {
    t_read_back_block = nullptr;  // abandoned: the copy into it may still land
    throw;
  }
}

// Sum of term(i) over i < n (n > 0) on ctx.stream, returned to the host (Note [Host
// read-backs]).
template <class Term>
double device_sum(const ExecContext& ctx, const Term& term, std::int64_t n, const char* what) {
  const cudaStream_t stream = stream_of(ctx);
  const unsigned blocks = sum_blocks(n);
  auto* total = static_cast<double*>(read_back_block());
  {
    StreamScratch scratch(stream, sizeof(double) * (blocks + 1));
    double* partial = scratch.as<double>();
    double* result = partial + blocks;
    partial_sums_kernel<<<blocks, kThreads, 0, stream>>>(term, n, partial);
    ZL_CUDA_CHECK(cudaGetLastError());
    finish_sum_kernel<<<1, kThreads, 0, stream>>>(partial, blocks, result);
    ZL_CUDA_CHECK(cudaGetLastError());
    ZL_CUDA_CHECK(cudaMemcpyAsync(total, result, sizeof(double), cudaMemcpyDeviceToHost, stream));
  }  // the scratch free is stream-ordered after the copy
  wait_for_stream(ctx, what);
  return *total;
}

}  // namespace

// Returns the sum of per-row losses of logits (rows, cols) against labels (rows) and *correct =
// rows whose first argmax is the label; dlogits (rows, cols) = (softmax - onehot) * grad_scale if
// not null. Synchronises ctx.stream. A label outside [0, cols) is a UserError, as on the CPU (its
// row of dlogits is left unwritten; the other rows are written).
template <class T>
double softmax_cross_entropy_cuda(const ExecContext& ctx, const T* logits,
                                  const std::int32_t* labels, std::int64_t rows, std::int64_t cols,
                                  T* dlogits, float grad_scale, std::int64_t* correct) {
  check_size(rows, "softmax_cross_entropy_cuda");
  check_size(cols, "softmax_cross_entropy_cuda");
  if (rows == 0) {
    if (correct != nullptr) *correct = 0;
    return 0.0;
  }
  ZL_CHECK(cols > 0, "softmax_cross_entropy: cols = 0 with rows = {}", rows);
  const cudaStream_t stream = stream_of(ctx);
  static_assert(sizeof(LossTotals) <= kReadBackBytes);
  auto* read_back = static_cast<LossTotals*>(read_back_block());
  {
    // RowResult (16 bytes) per row, then the totals (16-byte aligned).
    StreamScratch scratch(stream,
                          sizeof(RowResult) * static_cast<std::size_t>(rows) + sizeof(LossTotals));
    RowResult* row_results = scratch.as<RowResult>();
    LossTotals* device_totals = reinterpret_cast<LossTotals*>(row_results + rows);
    softmax_cross_entropy_rows_kernel<<<grid_for_rows(rows), kThreads, 0, stream>>>(
        logits, labels, rows, cols, dlogits, grad_scale, row_results);
    ZL_CUDA_CHECK(cudaGetLastError());
    loss_totals_kernel<<<1, kThreads, 0, stream>>>(row_results, rows, device_totals);
    ZL_CUDA_CHECK(cudaGetLastError());
    ZL_CUDA_CHECK(cudaMemcpyAsync(read_back, device_totals, sizeof(LossTotals),
                                  cudaMemcpyDeviceToHost, stream));
  }  // the scratch free is stream-ordered after the copy
  wait_for_stream(ctx, "softmax_cross_entropy");
  const LossTotals totals = *read_back;
  if (totals.first_bad_row < rows) {
    std::int32_t label = 0;
    ZL_CUDA_CHECK(cudaMemcpy(&label, labels + totals.first_bad_row, sizeof(label),
                             cudaMemcpyDeviceToHost));
    throw UserError(fmt::format(
        "softmax_cross_entropy: label {} of row {} is outside [0, {}); the data's labels do not "
        "match the model's number of classes (its last width)",
        label, totals.first_bad_row, cols));
  }
  if (correct != nullptr) *correct = totals.correct;
  return totals.loss;
}

// Returns sum of (pred - target)^2 over n elements (double); dpred (n) = 2 * (pred - target) *
// grad_scale if not null. Synchronises ctx.stream.
template <class T>
double squared_error_cuda(const ExecContext& ctx, const T* pred, const float* target,
                          std::int64_t n, T* dpred, float grad_scale) {
  check_size(n, "squared_error_cuda");
  if (n == 0) return 0.0;
  return device_sum(ctx, SquaredErrorTerm<T>{pred, target, dpred, 2.0f * grad_scale}, n,
                    "squared_error");
}

// Returns sum of x^2 over x (n), in double. Synchronises ctx.stream.
template <class T>
double sum_of_squares_cuda(const ExecContext& ctx, const T* x, std::int64_t n) {
  check_size(n, "sum_of_squares_cuda");
  if (n == 0) return 0.0;
  return device_sum(ctx, SquareTerm<T>{x}, n, "sum_of_squares");
}

// Adds this batch's mean loss, correct rows and bad-label rows to sums (device doubles) on
// ctx.stream; never waits. A bad label's row of dlogits is left unwritten, as in
// softmax_cross_entropy_cuda; the caller reports sums[2] > 0 when it reads the sums back.
template <class T>
void softmax_cross_entropy_accumulate_cuda(const ExecContext& ctx, const T* logits,
                                           const std::int32_t* labels, std::int64_t rows,
                                           std::int64_t cols, T* dlogits, float grad_scale,
                                           double* sums) {
  check_size(rows, "softmax_cross_entropy_accumulate_cuda");
  check_size(cols, "softmax_cross_entropy_accumulate_cuda");
  if (rows == 0) return;
  ZL_CHECK(cols > 0, "softmax_cross_entropy: cols = 0 with rows = {}", rows);
  const cudaStream_t stream = stream_of(ctx);
  StreamScratch scratch(stream, sizeof(RowResult) * static_cast<std::size_t>(rows));
  RowResult* row_results = scratch.as<RowResult>();
  softmax_cross_entropy_rows_kernel<<<grid_for_rows(rows), kThreads, 0, stream>>>(
      logits, labels, rows, cols, dlogits, grad_scale, row_results);
  ZL_CUDA_CHECK(cudaGetLastError());
  loss_accumulate_kernel<<<1, kThreads, 0, stream>>>(row_results, rows, sums);
  ZL_CUDA_CHECK(cudaGetLastError());
}  // the scratch free is stream-ordered after the kernels

// sums[0] += (sum of (pred - target)^2) / divisor on ctx.stream; dpred as squared_error_cuda.
template <class T>
void squared_error_accumulate_cuda(const ExecContext& ctx, const T* pred, const float* target,
                                   std::int64_t n, T* dpred, float grad_scale, double divisor,
                                   double* sums) {
  check_size(n, "squared_error_accumulate_cuda");
  if (n == 0) return;
  const cudaStream_t stream = stream_of(ctx);
  const unsigned blocks = sum_blocks(n);
  StreamScratch scratch(stream, sizeof(double) * blocks);
  double* partial = scratch.as<double>();
  partial_sums_kernel<<<blocks, kThreads, 0, stream>>>(
      SquaredErrorTerm<T>{pred, target, dpred, 2.0f * grad_scale}, n, partial);
  ZL_CUDA_CHECK(cudaGetLastError());
  finish_sum_accumulate_kernel<<<1, kThreads, 0, stream>>>(partial, blocks, divisor, sums);
  ZL_CUDA_CHECK(cudaGetLastError());
}

// host (count) = sums, then sums = 0, both on ctx.stream; one wait (Note [Host read-backs]).
void take_device_sums_cuda(const ExecContext& ctx, double* sums, double* host, int count) {
  ZL_CHECK(count >= 0 && static_cast<std::size_t>(count) * sizeof(double) <= kReadBackBytes,
           "take_device_sums: {} doubles do not fit the read-back block", count);
  if (count == 0) return;
  const cudaStream_t stream = stream_of(ctx);
  const std::size_t bytes = static_cast<std::size_t>(count) * sizeof(double);
  auto* read_back = static_cast<double*>(read_back_block());
  ZL_CUDA_CHECK(cudaMemcpyAsync(read_back, sums, bytes, cudaMemcpyDeviceToHost, stream));
  ZL_CUDA_CHECK(cudaMemsetAsync(sums, 0, bytes, stream));
  wait_for_stream(ctx, "take_device_sums");
  std::memcpy(host, read_back, bytes);
}

// Sum over spans of each span's sum of squares: each span reduced as sum_of_squares_cuda does,
// the span totals added in span order on the device, one read-back for all.
template <class T>
double total_sum_of_squares_cuda(const ExecContext& ctx, const ReadSpan<T>* spans,
                                 std::int64_t count) {
  check_size(count, "total_sum_of_squares_cuda");
  if (count == 0) return 0.0;
  std::int64_t partial_count = 0;
  for (std::int64_t i = 0; i < count; ++i) {
    check_size(spans[i].n, "total_sum_of_squares_cuda");
    if (spans[i].n > 0) partial_count += sum_blocks(spans[i].n);
  }
  const cudaStream_t stream = stream_of(ctx);
  auto* read_back = static_cast<double*>(read_back_block());
  {
    // partials, then one total per span, then the grand total.
    StreamScratch scratch(stream,
                          sizeof(double) * static_cast<std::size_t>(partial_count + count + 1));
    double* partial = scratch.as<double>();
    double* span_totals = partial + partial_count;
    double* total = span_totals + count;
    ZL_CUDA_CHECK(cudaMemsetAsync(span_totals, 0, sizeof(double) * static_cast<std::size_t>(count),
                                  stream));  // empty spans add 0
    for (std::int64_t i = 0; i < count; ++i) {
      if (spans[i].n == 0) continue;
      const unsigned blocks = sum_blocks(spans[i].n);
      partial_sums_kernel<<<blocks, kThreads, 0, stream>>>(SquareTerm<T>{spans[i].data},
                                                           spans[i].n, partial);
      ZL_CUDA_CHECK(cudaGetLastError());
      finish_sum_kernel<<<1, kThreads, 0, stream>>>(partial, blocks, span_totals + i);
      ZL_CUDA_CHECK(cudaGetLastError());
      partial += blocks;
    }
    ordered_sum_kernel<<<1, 1, 0, stream>>>(span_totals, count, total);
    ZL_CUDA_CHECK(cudaGetLastError());
    ZL_CUDA_CHECK(
        cudaMemcpyAsync(read_back, total, sizeof(double), cudaMemcpyDeviceToHost, stream));
  }  // the scratch free is stream-ordered after the copy
  wait_for_stream(ctx, "total_sum_of_squares");
  return *read_back;
}

#define ZL_REDUCTION_CUDA_INSTANCES(T)                                                           \
  template double softmax_cross_entropy_cuda<T>(const ExecContext&, const T*,                    \
                                                const std::int32_t*, std::int64_t, std::int64_t, \
                                                T*, float, std::int64_t*);                       \
  template double squared_error_cuda<T>(const ExecContext&, const T*, const float*,              \
                                        std::int64_t, T*, float);                                \
  template double sum_of_squares_cuda<T>(const ExecContext&, const T*, std::int64_t);           \
  template void softmax_cross_entropy_accumulate_cuda<T>(const ExecContext&, const T*,           \
                                                         const std::int32_t*, std::int64_t,      \
                                                         std::int64_t, T*, float, double*);      \
  template void squared_error_accumulate_cuda<T>(const ExecContext&, const T*, const float*,     \
                                                 std::int64_t, T*, float, double, double*);      \
  template double total_sum_of_squares_cuda<T>(const ExecContext&, const ReadSpan<T>*,          \
                                               std::int64_t);

ZL_REDUCTION_CUDA_INSTANCES(float)
ZL_REDUCTION_CUDA_INSTANCES(Bf16)
#undef ZL_REDUCTION_CUDA_INSTANCES

}  // namespace zl
