// CUDA fused optimizer steps: one launch per call over a flat slice of (p, g, state), enqueued on
// ctx.stream. The per-element math is adam_update / sgd_update from kernels/optim_math.h, the
// same functions the CPU loop calls, so both devices implement one formula. Neither side fuses a
// multiply and an add (-fmad=false here, -ffp-contract=off on the CPU: CMakeLists.txt), and nvcc's
// default division and square root round as IEEE does; the tests still compare the devices under
// a tolerance (tests/kernels/test_cuda_*.cpp), as CPU-GPU bitwise equality is unmeasured.
// The bf16 kernels (bf16_step_kernel) do the same for a bf16 bucket: one pass that also writes the
// bf16 parameter the broadcast sends.
#include <cstdint>

#include "kernels/cuda_common.cuh"
#include "kernels/cuda_kernels.h"

namespace zl {
namespace {

using cuda_detail::grid_for;
using cuda_detail::kThreads;

bool aligned16(const void* ptr) { return reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0; }

// The vectorised path reads and writes float4s: legal only when every pointer is 16-byte aligned
// (checked on the host before choosing it). The parameter store aligns every bucket to 64 bytes,
// so a bucket's slice is the common case; a slice starting mid-float4 takes the scalar path.
// Elements n4*4 .. n-1 (at most 3) are the scalar tail of the vectorised path.

// p, m, v (n) updated in place from g (n).
template <bool kVectorised>
__global__ void adam_kernel(float* __restrict__ p, const float* __restrict__ g,
                            float* __restrict__ m, float* __restrict__ v, std::int64_t n,
                            AdamStep s) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  std::int64_t scalar_begin = 0;
  if constexpr (kVectorised) {
    const std::int64_t n4 = n / 4;
    float4* p4 = reinterpret_cast<float4*>(p);
    const float4* g4 = reinterpret_cast<const float4*>(g);
    float4* m4 = reinterpret_cast<float4*>(m);
    float4* v4 = reinterpret_cast<float4*>(v);
    for (std::int64_t i = first; i < n4; i += stride) {
      float4 pp = p4[i];
      const float4 gg = g4[i];
      float4 mm = m4[i];
      float4 vv = v4[i];
      adam_update(pp.x, gg.x, mm.x, vv.x, s);
      adam_update(pp.y, gg.y, mm.y, vv.y, s);
      adam_update(pp.z, gg.z, mm.z, vv.z, s);
      adam_update(pp.w, gg.w, mm.w, vv.w, s);
      p4[i] = pp;
      m4[i] = mm;
      v4[i] = vv;
    }
    scalar_begin = n4 * 4;
  }
  for (std::int64_t i = scalar_begin + first; i < n; i += stride) {
    float pp = p[i];
    float mm = m[i];
    float vv = v[i];
    adam_update(pp, g[i], mm, vv, s);
    p[i] = pp;
    m[i] = mm;
    v[i] = vv;
  }
}

// p (n) and, with kMomentum, buf (n) updated in place from g (n). Without momentum the buffer is
// neither read nor written (it may be null): sgd_update ignores it when momentum == 0.
template <bool kVectorised, bool kMomentum>
__global__ void sgd_kernel(float* __restrict__ p, const float* __restrict__ g,
                           float* __restrict__ buf, std::int64_t n, SgdStep s) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  std::int64_t scalar_begin = 0;
  if constexpr (kVectorised) {
    const std::int64_t n4 = n / 4;
    float4* p4 = reinterpret_cast<float4*>(p);
    const float4* g4 = reinterpret_cast<const float4*>(g);
    float4* b4 = reinterpret_cast<float4*>(buf);
    for (std::int64_t i = first; i < n4; i += stride) {
      float4 pp = p4[i];
      const float4 gg = g4[i];
      float4 bb = kMomentum ? b4[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      sgd_update(pp.x, gg.x, bb.x, s);
      sgd_update(pp.y, gg.y, bb.y, s);
      sgd_update(pp.z, gg.z, bb.z, s);
      sgd_update(pp.w, gg.w, bb.w, s);
      p4[i] = pp;
      if (kMomentum) b4[i] = bb;
    }
    scalar_begin = n4 * 4;
  }
  for (std::int64_t i = scalar_begin + first; i < n; i += stride) {
    float pp = p[i];
    float bb = kMomentum ? buf[i] : 0.0f;
    sgd_update(pp, g[i], bb, s);
    p[i] = pp;
    if (kMomentum) buf[i] = bb;
  }
}

// --- bf16 parameters (kernels/optimizer_kernels.h, Bf16OptimizerSlice) ---

// Four consecutive elements, loaded and stored as one vector access (16 bytes for fp32, 8 for the
// 2-byte types); legal when the array's slice start is aligned to the pack (host-checked).
template <class T>
struct alignas(4 * sizeof(T)) Pack4 {
  T e[4];
};

enum class Bf16Rule { Adam, SgdMomentum, SgdPlain };

// The arrays of one launch; the ones a rule does not use are null and never touched.
template <class G>
struct Bf16Arrays {
  const G* g;
  Bf16* param;
  float* master;
  std::int16_t* remainder;
  float* m;
  float* v;
};

// One element: the rule's update on the master layout kMaster (kernels/optim_math.h).
template <Bf16Rule kRule, MasterWeights kMaster, class G>
__device__ __forceinline__ void bf16_element(G g, Bf16& param, float& master, std::int16_t& rem,
                                             float& m, float& v, const AdamStep& as,
                                             const SgdStep& ss) {
  if constexpr (kRule == Bf16Rule::Adam) {
    if constexpr (kMaster == MasterWeights::Fp32) {
      adam_update_master(master, param, g, m, v, as);
    } else {
      adam_update_remainder(param, rem, g, m, v, as);
    }
  } else {
    if constexpr (kMaster == MasterWeights::Fp32) {
      sgd_update_master(master, param, g, m, ss);
    } else {
      sgd_update_remainder(param, rem, g, m, ss);
    }
  }
}

template <Bf16Rule kRule, MasterWeights kMaster, bool kVectorised, class G>
__global__ void bf16_step_kernel(Bf16Arrays<G> a, std::int64_t n, AdamStep as, SgdStep ss) {
  constexpr bool kFp32Master = kMaster == MasterWeights::Fp32;
  constexpr bool kM = kRule != Bf16Rule::SgdPlain;
  constexpr bool kV = kRule == Bf16Rule::Adam;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  std::int64_t scalar_begin = 0;
  if constexpr (kVectorised) {
    const std::int64_t n4 = n / 4;
    for (std::int64_t i = first; i < n4; i += stride) {
      const Pack4<G> g = reinterpret_cast<const Pack4<G>*>(a.g)[i];
      Pack4<Bf16> p{};
      Pack4<float> x{}, m{}, v{};
      Pack4<std::int16_t> r{};
      if constexpr (kFp32Master) {
        x = reinterpret_cast<const Pack4<float>*>(a.master)[i];  // the parameter is write-only
      } else {
        p = reinterpret_cast<const Pack4<Bf16>*>(a.param)[i];
        r = reinterpret_cast<const Pack4<std::int16_t>*>(a.remainder)[i];
      }
      if constexpr (kM) m = reinterpret_cast<const Pack4<float>*>(a.m)[i];
      if constexpr (kV) v = reinterpret_cast<const Pack4<float>*>(a.v)[i];
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        bf16_element<kRule, kMaster>(g.e[k], p.e[k], x.e[k], r.e[k], m.e[k], v.e[k], as, ss);
      }
      reinterpret_cast<Pack4<Bf16>*>(a.param)[i] = p;
      if constexpr (kFp32Master) {
        reinterpret_cast<Pack4<float>*>(a.master)[i] = x;
      } else {
        reinterpret_cast<Pack4<std::int16_t>*>(a.remainder)[i] = r;
      }
      if constexpr (kM) reinterpret_cast<Pack4<float>*>(a.m)[i] = m;
      if constexpr (kV) reinterpret_cast<Pack4<float>*>(a.v)[i] = v;
    }
    scalar_begin = n4 * 4;
  }
  for (std::int64_t i = scalar_begin + first; i < n; i += stride) {
    Bf16 p{};
    float x = 0.0f, m = 0.0f, v = 0.0f;
    std::int16_t r = 0;
    if constexpr (kFp32Master) {
      x = a.master[i];
    } else {
      p = a.param[i];
      r = a.remainder[i];
    }
    if constexpr (kM) m = a.m[i];
    if constexpr (kV) v = a.v[i];
    bf16_element<kRule, kMaster>(a.g[i], p, x, r, m, v, as, ss);
    a.param[i] = p;
    if constexpr (kFp32Master) {
      a.master[i] = x;
    } else {
      a.remainder[i] = r;
    }
    if constexpr (kM) a.m[i] = m;
    if constexpr (kV) a.v[i] = v;
  }
}

bool aligned8(const void* ptr) { return reinterpret_cast<std::uintptr_t>(ptr) % 8 == 0; }

// Work items of one launch: float4 groups on the vectorised path (its <= 3 tail elements are
// covered by the first threads of the grid), elements otherwise.
std::int64_t work_items(std::int64_t n, bool vectorised) { return vectorised ? (n + 3) / 4 : n; }

}  // namespace

// p, m, v (n) updated in place ("=") from g (n); one launch.
void adam_step_cuda(const ExecContext& ctx, float* p, const float* g, float* m, float* v,
                    std::int64_t n, const AdamStep& step) {
  ZL_CHECK(n >= 0, "adam_step_cuda: n = {}", n);
  if (n == 0) return;
  ZL_CHECK(p && g && m && v, "adam_step_cuda: null pointer");
  const bool vectorised = aligned16(p) && aligned16(g) && aligned16(m) && aligned16(v);
  const unsigned blocks = grid_for(work_items(n, vectorised));
  const cudaStream_t stream = cuda_detail::stream_of(ctx);
  if (vectorised) {
    adam_kernel<true><<<blocks, kThreads, 0, stream>>>(p, g, m, v, n, step);
  } else {
    adam_kernel<false><<<blocks, kThreads, 0, stream>>>(p, g, m, v, n, step);
  }
  ZL_CUDA_CHECK(cudaGetLastError());
}

// p (n) and momentum_buffer (n, when step.momentum != 0) updated in place from g (n); one launch.
void sgd_step_cuda(const ExecContext& ctx, float* p, const float* g, float* momentum_buffer,
                   std::int64_t n, const SgdStep& step) {
  ZL_CHECK(n >= 0, "sgd_step_cuda: n = {}", n);
  if (n == 0) return;
  ZL_CHECK(p && g, "sgd_step_cuda: null pointer");
  const bool momentum = step.momentum != 0.0f;
  ZL_CHECK(!momentum || momentum_buffer != nullptr,
           "sgd_step_cuda: momentum = {} needs a momentum buffer", step.momentum);
  const bool vectorised = aligned16(p) && aligned16(g) && (!momentum || aligned16(momentum_buffer));
  const unsigned blocks = grid_for(work_items(n, vectorised));
  const cudaStream_t stream = cuda_detail::stream_of(ctx);
  if (vectorised && momentum) {
    sgd_kernel<true, true><<<blocks, kThreads, 0, stream>>>(p, g, momentum_buffer, n, step);
  } else if (vectorised) {
    sgd_kernel<true, false><<<blocks, kThreads, 0, stream>>>(p, g, nullptr, n, step);
  } else if (momentum) {
    sgd_kernel<false, true><<<blocks, kThreads, 0, stream>>>(p, g, momentum_buffer, n, step);
  } else {
    sgd_kernel<false, false><<<blocks, kThreads, 0, stream>>>(p, g, nullptr, n, step);
  }
  ZL_CUDA_CHECK(cudaGetLastError());
}

namespace {

template <Bf16Rule kRule, class G>
void launch_bf16_step(const ExecContext& ctx, const Bf16OptimizerSlice& b, std::int64_t n,
                      const AdamStep& as, const SgdStep& ss) {
  const Bf16Arrays<G> a{static_cast<const G*>(b.grad), b.param, b.master, b.remainder, b.m, b.v};
  const bool fp32_master = b.master_weights == MasterWeights::Fp32;
  // Vector accesses need every used array's start aligned to its 4-element pack.
  bool vectorised = (sizeof(G) == 4 ? aligned16(a.g) : aligned8(a.g)) && aligned8(a.param) &&
                    (fp32_master ? aligned16(a.master) : aligned8(a.remainder));
  if (kRule != Bf16Rule::SgdPlain) vectorised = vectorised && aligned16(a.m);
  if (kRule == Bf16Rule::Adam) vectorised = vectorised && aligned16(a.v);
  const unsigned blocks = grid_for(work_items(n, vectorised));
  const cudaStream_t stream = cuda_detail::stream_of(ctx);
  constexpr MasterWeights kF = MasterWeights::Fp32, kR = MasterWeights::Remainders;
  if (fp32_master && vectorised) {
    bf16_step_kernel<kRule, kF, true><<<blocks, kThreads, 0, stream>>>(a, n, as, ss);
  } else if (fp32_master) {
    bf16_step_kernel<kRule, kF, false><<<blocks, kThreads, 0, stream>>>(a, n, as, ss);
  } else if (vectorised) {
    bf16_step_kernel<kRule, kR, true><<<blocks, kThreads, 0, stream>>>(a, n, as, ss);
  } else {
    bf16_step_kernel<kRule, kR, false><<<blocks, kThreads, 0, stream>>>(a, n, as, ss);
  }
  ZL_CUDA_CHECK(cudaGetLastError());
}

template <Bf16Rule kRule>
void launch_bf16_step(const ExecContext& ctx, const Bf16OptimizerSlice& b, std::int64_t n,
                      const AdamStep& as, const SgdStep& ss) {
  if (b.grad_dtype == DType::F32) return launch_bf16_step<kRule, float>(ctx, b, n, as, ss);
  launch_bf16_step<kRule, Bf16>(ctx, b, n, as, ss);
}

}  // namespace

void adam_step_bf16_cuda(const ExecContext& ctx, const Bf16OptimizerSlice& slice, std::int64_t n,
                         const AdamStep& step) {
  if (n == 0) return;  // adam_step_bf16 checked the slice
  launch_bf16_step<Bf16Rule::Adam>(ctx, slice, n, step, SgdStep{});
}

void sgd_step_bf16_cuda(const ExecContext& ctx, const Bf16OptimizerSlice& slice, std::int64_t n,
                        const SgdStep& step) {
  const bool momentum = step.momentum != 0.0f;
  if (n == 0) return;  // sgd_step_bf16 checked the slice
  if (momentum) return launch_bf16_step<Bf16Rule::SgdMomentum>(ctx, slice, n, AdamStep{}, step);
  launch_bf16_step<Bf16Rule::SgdPlain>(ctx, slice, n, AdamStep{}, step);
}

}  // namespace zl
