// bfloat16 storage and its exact conversions, callable on host and device (ZL_HD).
// - float_to_bf16: round to nearest, ties to even (as PyTorch's .to(torch.bfloat16) and CUDA's
//   __float2bfloat16_rn); a NaN stays a (quiet) NaN, infinities stay infinite.
// - bf16_to_float: exact (bf16 is the top half of an fp32).
// - split_master / join_master (Note [Remainders]): an fp32 master weight as its bf16 value plus
//   the 16 bits bf16 drops; join(split(x)) == x bitwise for every one of the 2^32 bit patterns.
#pragma once

#include <cstdint>
#include <cstring>

#include "base/host_device.h"

namespace zl {

// One bf16 value: the upper 16 bits of an fp32. A distinct type (not a bare uint16_t), so kernels
// templated on their storage type tell it apart from integers; layout-compatible with CUDA's
// __nv_bfloat16 and OpenBLAS's bfloat16 (both 16-bit bit patterns).
struct Bf16 {
  std::uint16_t bits;
};
static_assert(sizeof(Bf16) == 2 && alignof(Bf16) == 2);

ZL_HD inline std::uint32_t float_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}

ZL_HD inline float bits_float(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
#endif
}

ZL_HD inline float bf16_to_float(Bf16 h) { return bits_float(std::uint32_t{h.bits} << 16); }

// Round to nearest even: add 0x7FFF plus the lowest kept bit, then truncate. The carry may run
// into the exponent (rounding up to the next binade or to infinity), which is the right result.
// A NaN must not round into an infinity (its payload may sit in the low 16 bits only), so it is
// truncated and made quiet.
ZL_HD inline Bf16 float_to_bf16(float x) {
  const std::uint32_t u = float_bits(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) {
    return Bf16{static_cast<std::uint16_t>((u >> 16) | 0x0040u)};
  }
  const std::uint32_t lsb = (u >> 16) & 1u;
  return Bf16{static_cast<std::uint16_t>((u + 0x7FFFu + lsb) >> 16)};
}

// Rounds x to the nearest bf16 value, returned as a float (what a bf16 store then load gives).
ZL_HD inline float round_to_bf16(float x) { return bf16_to_float(float_to_bf16(x)); }

// Loads and stores of the kernels templated on their storage type T (float or Bf16): arithmetic
// is fp32; for T = float both are the identity, so an fp32 instance computes what plain fp32
// code computes.
ZL_HD inline float to_f32(float v) { return v; }
ZL_HD inline float to_f32(Bf16 v) { return bf16_to_float(v); }
template <class T>
ZL_HD inline T from_f32(float v);
template <>
ZL_HD inline float from_f32<float>(float v) {
  return v;
}
template <>
ZL_HD inline Bf16 from_f32<Bf16>(float v) {
  return float_to_bf16(v);
}

// Note [Remainders]: an fp32 master weight x is kept as its bf16 value hi plus an int16 lo, so an
// owner keeps 2 bytes per element instead of 4 beside the bf16 parameter it already has. hi is x
// rounded to nearest with ties AWAY from zero on the bit pattern (hi = top 16 bits, plus one when
// the dropped 16 bits are >= 0x8000); lo is the dropped 16 bits read as int16, so lo < 0 exactly
// when hi was rounded up, and join undoes that. Every hi has exactly 2^16 preimages, which is what
// makes the pair exact; round-to-nearest-EVEN cannot be inverted from 16 bits (an even hi has
// 2^16 + 1 preimages: both ties). So hi differs from float_to_bf16(x) only when x is exactly
// halfway between two bf16 values; an optimizer that must give the same bf16 parameter with an
// fp32 master as with remainders writes master_to_bf16(x) in both cases. The pair is exact for
// every pattern, NaNs included, but a NaN's hi may be no NaN: 0x7F800001 gives an infinite hi,
// 0x7FFFFFFF a zero (the round-up wraps); the optimizer writes NaNs whose hi is NaN
// (kernels/optim_math.h, nan_kept_in_bf16).
struct SplitMaster {
  Bf16 hi;
  std::int16_t lo;
};

ZL_HD inline SplitMaster split_master(float x) {
  const std::uint32_t u = float_bits(x);
  const std::uint16_t low = static_cast<std::uint16_t>(u & 0xFFFFu);
  const std::uint16_t high =
      static_cast<std::uint16_t>((u >> 16) + (low >= 0x8000u ? 1u : 0u));  // wraps at 0xFFFF
  return SplitMaster{Bf16{high}, static_cast<std::int16_t>(low)};
}

ZL_HD inline float join_master(Bf16 hi, std::int16_t lo) {
  const std::uint16_t low = static_cast<std::uint16_t>(lo);
  const std::uint16_t high = static_cast<std::uint16_t>(hi.bits - (low >= 0x8000u ? 1u : 0u));
  return bits_float((std::uint32_t{high} << 16) | low);
}

// The bf16 parameter that goes with an fp32 master x: split_master(x).hi.
ZL_HD inline Bf16 master_to_bf16(float x) { return split_master(x).hi; }

}  // namespace zl
