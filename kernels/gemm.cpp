// Row-major GEMM, fp32 or bf16 operands. CPU: oneDNN matmul primitives, which pick their kernel
// from the CPU's instruction set at run time (kernels/gemm_info.h says which); CUDA contexts go to
// cuBLAS (gemm_cuda). C = alpha * op(A) * op(B) + beta * C; beta == 0 overwrites C without reading
// it (BLAS semantics), so C may hold garbage (even NaN) when the caller overwrites. bf16 operands:
// oneDNN's bf16 matmul multiplies and accumulates in fp32 and writes an fp32 C, or a bf16 C
// rounded once to nearest even; where oneDNN has none, the same through its fp32 matmul
// (Note [bf16 GEMM through fp32]). ctx.gemm_math (TF32) does not apply on the CPU: oneDNN
// computes fp32 matmuls in fp32.
#include "kernels/gemm.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <type_traits>
#include <vector>

#include <dnnl.hpp>

#include "base/errors.h"
#include "kernels/cpu_parallel.h"
#include "kernels/cpu_team.h"
#include "kernels/gemm_onednn.h"
#if defined(ZEROLAP_WITH_CUDA)
#include "kernels/cuda_kernels.h"
#endif

namespace zl {
namespace {

// runtime.threads, applied lazily on whichever thread calls gemm: OpenMP's thread count (which
// oneDNN's kernels use) is a per-thread setting. 0: not set, OpenMP's default.
std::atomic<int> g_threads{0};

void use_threads(int want) {
  thread_local int applied = 0;
  if (want > 0 && want != applied) {
    omp_set_num_threads(want);
    applied = want;
  }
}

void apply_threads() { use_threads(g_threads.load(std::memory_order_relaxed)); }

// force_cpu_gemm_bf16_through_fp32: the fp32 path even where oneDNN has a bf16 matmul.
std::atomic<bool> g_bf16_through_fp32{false};

// One primitive per call shape: creating one costs far more than running a small GEMM, and a
// model has a handful of shapes (3 per Linear layer).
using DataType = dnnl::memory::data_type;
// The last field is the thread count the primitive was created for: oneDNN fixes a primitive's
// partition of the work (and so its order of summation) when it is created, from the OpenMP
// thread count then in effect.
using Key = std::tuple<bool, bool, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                       std::int64_t, std::int64_t, float, float, DataType, DataType, int>;

struct Matmul {
  dnnl::memory::desc a, b, c;
  dnnl::matmul primitive;
};

dnnl::memory::desc matrix(std::int64_t rows, std::int64_t cols, bool transposed, std::int64_t ld,
                          DataType type) {
  // A logical (rows, cols) matrix stored row-major with row stride ld, or transposed: stored
  // (cols, rows), so element (i, j) sits at j * ld + i.
  return dnnl::memory::desc({rows, cols}, type,
                            transposed ? dnnl::memory::dims{1, ld} : dnnl::memory::dims{ld, 1});
}

template <class T>
constexpr DataType data_type() {
  return std::is_same_v<T, float> ? DataType::f32 : DataType::bf16;
}

const Matmul& matmul_for(const Key& key) {
  static std::mutex mutex;
  static std::map<Key, Matmul> cache;
  const std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  const auto& [ta, tb, m, n, k, lda, ldb, ldc, alpha, beta, in_type, out_type, threads] = key;
  use_threads(threads);  // the primitive's partition is fixed now, for this count
  Matmul mm;
  mm.a = matrix(m, k, ta, lda, in_type);
  mm.b = matrix(k, n, tb, ldb, in_type);
  mm.c = matrix(m, n, false, ldc, out_type);
  dnnl::primitive_attr attr;
  if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
  if (beta != 0.0f) {
    dnnl::post_ops ops;
    ops.append_sum(beta);  // C = alpha * A B + beta * C_old
    attr.set_post_ops(ops);
  }
  try {
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(mm.a, mm.b, mm.c), attr,
                                          cpu_gemm_engine());
    mm.primitive = dnnl::matmul(pd);
  } catch (const dnnl::error& e) {
    // A bf16 matmul needs AVX-512 (oneDNN 2.6 emulates bf16 on avx512_core); without it bf16
    // GEMMs go through fp32 (cpu_gemm_bf16_path), so this names a library or shape fault.
    const auto name = [](DataType t) { return t == DataType::bf16 ? "bf16" : "fp32"; };
    throw UserError(fmt::format("gemm: oneDNN has no {} x {} -> {} matmul on this CPU ({})",
                                name(in_type), name(in_type), name(out_type), e.what()));
  }
  return cache.emplace(key, std::move(mm)).first->second;
}

template <class TA, class TC>
void run_matmul(const Key& key, const TA* a, const TA* b, TC* c) {
  const Matmul& mm = matmul_for(key);
  use_threads(std::get<12>(key));
  const dnnl::engine& engine = cpu_gemm_engine();
  thread_local dnnl::stream stream(engine);
  // oneDNN's memory objects take non-const pointers; the sources are only read.
  dnnl::memory am(mm.a, engine, const_cast<TA*>(a));
  dnnl::memory bm(mm.b, engine, const_cast<TA*>(b));
  dnnl::memory cm(mm.c, engine, c);
  mm.primitive.execute(stream, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
  stream.wait();
}

// Note [GEMM bits on a smaller team]: a run's GEMMs must give the bits of its full team
// (runtime.threads resolved) whatever team the load leaves it (kernels/cpu_team.h), and oneDNN
// may split a shape's reduction differently on fewer threads. So the first time a shape runs on a
// smaller team, it runs on both: the full team's result is the one kept, and the smaller team is
// used for that shape from then on only if its result had the same bits. The partition depends
// on the shape and the thread count, not on the values (and a different order of summation
// changes the rounding of real data), so one comparison stands for every later call.
enum class TeamBits { Unknown, Same, Differs };

template <class TA, class TC>
void run_matmul_on_team(const Key& full_key, int team, const TA* a, const TA* b, TC* c) {
  Key key = full_key;
  std::get<12>(key) = team;
  // Which smaller team gives which full team's bits: keyed by both counts.
  static std::mutex mutex;
  static std::map<std::pair<Key, int>, TeamBits> checked;
  const std::pair<Key, int> check{key, std::get<12>(full_key)};
  TeamBits bits = TeamBits::Unknown;
  {
    const std::lock_guard<std::mutex> lock(mutex);
    const auto it = checked.find(check);
    if (it != checked.end()) bits = it->second;
  }
  if (bits == TeamBits::Same) return run_matmul(key, a, b, c);
  if (bits == TeamBits::Differs) return run_matmul(full_key, a, b, c);
  const std::int64_t m = std::get<2>(full_key), n = std::get<3>(full_key);
  const std::int64_t ldc = std::get<7>(full_key);
  // C as the smaller team would see it (beta != 0 reads it), in the same layout (ldc).
  std::vector<TC> trial(c, c + (m - 1) * ldc + n);
  run_matmul(full_key, a, b, c);
  run_matmul(key, a, b, trial.data());
  bits = TeamBits::Same;
  for (std::int64_t i = 0; i < m; ++i) {
    const std::size_t row_bytes = static_cast<std::size_t>(n) * sizeof(TC);
    if (std::memcmp(c + i * ldc, trial.data() + i * ldc, row_bytes) != 0) {
      bits = TeamBits::Differs;
      break;
    }
  }
  const std::lock_guard<std::mutex> lock(mutex);
  checked[check] = bits;
}

// Row strides of the *stored* matrices: A is (m, k) untransposed or (k, m) transposed.
void check_input_strides(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k,
                         std::int64_t lda, std::int64_t ldb) {
  ZL_CHECK(lda >= (ta ? m : k), "gemm: lda = {} too small", lda);
  ZL_CHECK(ldb >= (tb ? k : n), "gemm: ldb = {} too small", ldb);
}

template <class TA, class TC>
void gemm_cpu(Transpose trans_a, Transpose trans_b, std::int64_t m, std::int64_t n,
              std::int64_t k, float alpha, const TA* a, std::int64_t lda, const TA* b,
              std::int64_t ldb, float beta, TC* c, std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  ZL_CHECK(ldc >= n, "gemm: ldc = {} < n = {}", ldc, n);
  if (k == 0) {
    // op(A) * op(B) is the zero matrix: C = beta * C (a matmul with K = 0 is not defined).
    for (std::int64_t i = 0; i < m; ++i) {
      TC* row = c + i * ldc;
      for (std::int64_t j = 0; j < n; ++j) {
        row[j] = from_f32<TC>(beta == 0.0f ? 0.0f : beta * to_f32(row[j]));
      }
    }
    return;
  }
  const bool ta = trans_a == Transpose::Yes, tb = trans_b == Transpose::Yes;
  check_input_strides(ta, tb, m, n, k, lda, ldb);
  const int full = g_threads.load(std::memory_order_relaxed);
  const Key key{ta,   tb,   m, n, k, lda, ldb, ldc, alpha, beta, data_type<TA>(), data_type<TC>(),
                full};
  const int team = full > 0 ? cpu_team_threads(full) : full;
  if (team != full) return run_matmul_on_team(key, team, a, b, c);
  run_matmul(key, a, b, c);
}

// Note [bf16 GEMM through fp32]: oneDNN 2.6 has a bf16 matmul only from AVX-512 up. Elsewhere
// (an AVX2 CPU) a bf16 GEMM widens A and B to fp32, which is exact (a bf16 is the top half of an
// fp32), and runs the fp32 matmul: fp32 products (exact, 8-bit significands) summed in fp32 with
// the same alpha and beta, so the documented semantics ("bf16 inputs, fp32 accumulation") hold
// and only speed differs. A bf16 C is computed in an fp32 copy (read widened when beta != 0, not
// read when beta == 0) and rounded once to nearest even, as the native path rounds. The fp32
// matmul goes through gemm_cpu, so Note [GEMM bits on a smaller team] holds here too; the
// widening and rounding are element-wise, the same bits however they are split.
// The widened copies live in per-thread buffers that only grow: after a model's first step
// (its largest shape) a GEMM allocates nothing.
struct WideningScratch {
  std::vector<float> a, b, c;
};

float* grown(std::vector<float>& v, std::int64_t n) {
  if (v.size() < static_cast<std::size_t>(n)) v.resize(static_cast<std::size_t>(n));
  return v.data();
}

// Rows of `cols` elements, split by rows over the GEMM's team (kernels/cpu_parallel.h).
template <class Fn>
void for_row_chunks(std::int64_t rows, std::int64_t cols, const Fn& fn) {
  const int threads = std::max(1, g_threads.load(std::memory_order_relaxed));
  for_chunks(threads, rows, fn, 1, std::max<std::int64_t>(1, kMinChunkElements / cols));
}

// dst (rows, cols), packed, = src (rows, cols) with row stride ld, widened exactly.
void widen(const Bf16* src, std::int64_t ld, std::int64_t rows, std::int64_t cols, float* dst) {
  for_row_chunks(rows, cols, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const Bf16* in = src + r * ld;
      float* out = dst + r * cols;
      for (std::int64_t j = 0; j < cols; ++j) out[j] = bf16_to_float(in[j]);
    }
  });
}

// dst (rows, cols) with row stride ld = src (rows, cols), packed, rounded to nearest even.
void round_rows(const float* src, std::int64_t rows, std::int64_t cols, Bf16* dst,
                std::int64_t ld) {
  for_row_chunks(rows, cols, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const float* in = src + r * cols;
      Bf16* out = dst + r * ld;
      for (std::int64_t j = 0; j < cols; ++j) out[j] = float_to_bf16(in[j]);
    }
  });
}

template <class TC>
void gemm_bf16_through_fp32(Transpose trans_a, Transpose trans_b, std::int64_t m, std::int64_t n,
                            std::int64_t k, float alpha, const Bf16* a, std::int64_t lda,
                            const Bf16* b, std::int64_t ldb, float beta, TC* c, std::int64_t ldc) {
  // Nothing to widen: gemm_cpu's empty and k = 0 cases read neither A nor B.
  if (m == 0 || n == 0 || k == 0) {
    return gemm_cpu(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  const bool ta = trans_a == Transpose::Yes, tb = trans_b == Transpose::Yes;
  check_input_strides(ta, tb, m, n, k, lda, ldb);
  ZL_CHECK(ldc >= n, "gemm: ldc = {} < n = {}", ldc, n);
  thread_local WideningScratch scratch;
  // The stored matrices, packed: A is (m, k) or, transposed, (k, m); B (k, n) or (n, k).
  const std::int64_t a_rows = ta ? k : m, a_cols = ta ? m : k;
  const std::int64_t b_rows = tb ? n : k, b_cols = tb ? k : n;
  float* wa = grown(scratch.a, a_rows * a_cols);
  float* wb = grown(scratch.b, b_rows * b_cols);
  widen(a, lda, a_rows, a_cols, wa);
  widen(b, ldb, b_rows, b_cols, wb);
  if constexpr (std::is_same_v<TC, float>) {
    gemm_cpu(trans_a, trans_b, m, n, k, alpha, wa, a_cols, wb, b_cols, beta, c, ldc);
  } else {
    float* wc = grown(scratch.c, m * n);
    if (beta != 0.0f) widen(c, ldc, m, n, wc);  // beta == 0: C is not read (may be NaN)
    gemm_cpu(trans_a, trans_b, m, n, k, alpha, wa, a_cols, wb, b_cols, beta, wc, n);
    round_rows(wc, m, n, c, ldc);
  }
}

// The device dispatch of every gemm overload: cuBLAS (gemm_cuda, same overloads) on CUDA contexts,
// oneDNN otherwise.
template <class TA, class TC>
void gemm_on_device(const ExecContext& ctx, Transpose trans_a, Transpose trans_b, std::int64_t m,
                    std::int64_t n, std::int64_t k, float alpha, const TA* a, std::int64_t lda,
                    const TA* b, std::int64_t ldb, float beta, TC* c, std::int64_t ldc) {
  if (ctx.device == DeviceKind::Cuda) {
#if defined(ZEROLAP_WITH_CUDA)
    gemm_cuda(ctx, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
#else
    throw_built_without_cuda("gemm");
#endif
  }
  if constexpr (std::is_same_v<TA, Bf16>) {
    if (cpu_gemm_bf16_path() == CpuBf16Gemm::ThroughFp32) {
      return gemm_bf16_through_fp32(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c,
                                    ldc);
    }
  }
  gemm_cpu(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace

const dnnl::engine& cpu_gemm_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

void gemm(const ExecContext& ctx, Transpose trans_a, Transpose trans_b, std::int64_t m,
          std::int64_t n, std::int64_t k, float alpha, const float* a, std::int64_t lda,
          const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  gemm_on_device(ctx, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm(const ExecContext& ctx, Transpose trans_a, Transpose trans_b, std::int64_t m,
          std::int64_t n, std::int64_t k, float alpha, const Bf16* a, std::int64_t lda,
          const Bf16* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  gemm_on_device(ctx, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm(const ExecContext& ctx, Transpose trans_a, Transpose trans_b, std::int64_t m,
          std::int64_t n, std::int64_t k, float alpha, const Bf16* a, std::int64_t lda,
          const Bf16* b, std::int64_t ldb, float beta, Bf16* c, std::int64_t ldc) {
  gemm_on_device(ctx, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void set_cpu_gemm_threads(int threads) {
  if (threads < 1) throw UserError(fmt::format("gemm threads must be >= 1, got {}", threads));
  g_threads.store(threads, std::memory_order_relaxed);
  apply_threads();
}

bool cpu_gemm_bf16_native() {
  // oneDNN implements bf16 matmul (bf16 inputs, fp32 accumulation and output) on CPUs from
  // AVX-512 up; where it has none, creating the primitive descriptor throws. Asked once.
  static const bool has = [] {
    try {
      const auto desc = [](dnnl::memory::data_type type) {
        return dnnl::memory::desc({2, 2}, type, dnnl::memory::format_tag::ab);
      };
      const auto bf16 = dnnl::memory::data_type::bf16;
      const dnnl::matmul::primitive_desc pd(
          dnnl::matmul::desc(desc(bf16), desc(bf16), desc(dnnl::memory::data_type::f32)),
          cpu_gemm_engine());
      return true;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return has;
}

CpuBf16Gemm cpu_gemm_bf16_path() {
  if (g_bf16_through_fp32.load(std::memory_order_relaxed) || !cpu_gemm_bf16_native()) {
    return CpuBf16Gemm::ThroughFp32;
  }
  return CpuBf16Gemm::Native;
}

void force_cpu_gemm_bf16_through_fp32(bool force) {
  g_bf16_through_fp32.store(force, std::memory_order_relaxed);
}

}  // namespace zl
