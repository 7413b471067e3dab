// base/bf16.h: float -> bf16 rounds to nearest even (checked against an independent reference in
// double over millions of bit patterns, with every edge: ties, the binade carry, overflow to
// infinity, subnormals, signed zeros, NaNs); bf16 -> float is exact; split_master/join_master
// (Note [Remainders]) restore every bit pattern exactly, and hi is the nearest bf16 (ties away).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "base/bf16.h"
#include "base/dtype.h"

namespace {

// The bit patterns tested: every high half with assorted low halves (all exponents, both signs),
// every low half with assorted high halves (every rounding case, including the carry into the
// exponent and into infinity), and a prime stride through all 2^32.
std::vector<std::uint32_t> sample_patterns() {
  std::vector<std::uint32_t> out;
  const std::uint32_t lows[] = {0x0000, 0x0001, 0x3FFF, 0x7FFF, 0x8000, 0x8001, 0xC000, 0xFFFF};
  for (std::uint32_t high = 0; high <= 0xFFFF; ++high) {
    for (const std::uint32_t low : lows) out.push_back(high << 16 | low);
  }
  std::vector<std::uint32_t> highs = {0x0000, 0x0001, 0x0002, 0x007F, 0x0080, 0x0081, 0x3F80,
                                      0x3F81, 0x3FFF, 0x4000, 0x7F7E, 0x7F7F, 0x7F80, 0x7F81,
                                      0x7FBF, 0x7FC0, 0x7FFF, 0xFFFF};
  const std::size_t fixed = highs.size();
  for (std::size_t i = 0; i < fixed; ++i) highs.push_back(highs[i] | 0x8000);  // negatives
  std::mt19937 rng(12);
  for (int i = 0; i < 28; ++i) highs.push_back(rng() & 0xFFFF);
  for (const std::uint32_t high : highs) {
    for (std::uint32_t low = 0; low <= 0xFFFF; ++low) out.push_back(high << 16 | low);
  }
  for (std::uint64_t u = 0; u <= 0xFFFFFFFFull; u += 65521) out.push_back(static_cast<std::uint32_t>(u));
  return out;
}

bool is_nan_bits(std::uint32_t u) { return (u & 0x7FFFFFFFu) > 0x7F800000u; }

// The value of the bf16 whose bits follow `t` (t's magnitude plus one unit in the last place), as
// a double with an unbounded exponent: past the largest finite bf16 it is 2^128, which is how IEEE
// rounding decides overflow to infinity.
double next_up_magnitude(std::uint32_t t) {
  const int exponent = static_cast<int>((t >> 23) & 0xFF);
  const double ulp = std::ldexp(1.0, (exponent == 0 ? -126 : exponent - 127) - 7);
  return std::fabs(static_cast<double>(zl::bits_float(t))) + ulp;
}

// Reference round-to-nearest-even of a finite, non-NaN pattern: pick between truncation and the
// next bf16 up in magnitude by distance, computed exactly in double.
std::uint16_t reference_rne(std::uint32_t u) {
  const std::uint32_t t = u & 0xFFFF0000u;
  if (t == u) return static_cast<std::uint16_t>(u >> 16);
  const double x = std::fabs(static_cast<double>(zl::bits_float(u)));
  const double down = x - std::fabs(static_cast<double>(zl::bits_float(t)));
  const double up = next_up_magnitude(t) - x;
  const bool round_up = up < down || (up == down && ((t >> 16) & 1u) == 1u);
  return static_cast<std::uint16_t>((t >> 16) + (round_up ? 1u : 0u));
}

}  // namespace

TEST_CASE("dtype sizes and names", "[base][bf16]") {
  STATIC_REQUIRE(zl::dtype_size(zl::DType::F32) == 4);
  STATIC_REQUIRE(zl::dtype_size(zl::DType::BF16) == 2);
  STATIC_REQUIRE(zl::dtype_of<float> == zl::DType::F32);
  STATIC_REQUIRE(zl::dtype_of<zl::Bf16> == zl::DType::BF16);
  CHECK(std::string(zl::dtype_name(zl::DType::F32)) == "fp32");
  CHECK(std::string(zl::dtype_name(zl::DType::BF16)) == "bf16");
}

TEST_CASE("float_to_bf16 rounds to nearest even; bf16_to_float is exact", "[base][bf16]") {
  const std::vector<std::uint32_t> patterns = sample_patterns();
  std::int64_t mismatches = 0;
  std::uint32_t first_mismatch = 0;
  for (const std::uint32_t u : patterns) {
    const zl::Bf16 h = zl::float_to_bf16(zl::bits_float(u));
    bool ok;
    if (is_nan_bits(u)) {
      ok = std::isnan(zl::bf16_to_float(h)) && (h.bits & 0x8000) == (u >> 16 & 0x8000);
    } else {
      ok = h.bits == reference_rne(u);
    }
    if (!ok && mismatches++ == 0) first_mismatch = u;
  }
  INFO(patterns.size() << " patterns; first mismatch 0x" << std::hex << first_mismatch);
  CHECK(mismatches == 0);

  // Named edges, spelled out.
  CHECK(zl::float_to_bf16(1.0f).bits == 0x3F80);
  CHECK(zl::float_to_bf16(-0.0f).bits == 0x8000);
  CHECK(zl::float_to_bf16(zl::bits_float(0x3F808000u)).bits == 0x3F80);  // tie, even stays
  CHECK(zl::float_to_bf16(zl::bits_float(0x3F818000u)).bits == 0x3F82);  // tie, odd goes up
  CHECK(zl::float_to_bf16(zl::bits_float(0x3FFFFFFFu)).bits == 0x4000);  // carry into exponent
  CHECK(zl::float_to_bf16(zl::bits_float(0x7F7F8000u)).bits == 0x7F80);  // overflow to +inf
  CHECK(zl::float_to_bf16(zl::bits_float(0x7F7F7FFFu)).bits == 0x7F7F);  // largest finite
  CHECK(zl::float_to_bf16(INFINITY).bits == 0x7F80);
  CHECK(zl::float_to_bf16(-INFINITY).bits == 0xFF80);
  CHECK(std::isnan(zl::bf16_to_float(zl::float_to_bf16(zl::bits_float(0x7F800001u)))));
  CHECK(std::isnan(zl::bf16_to_float(zl::float_to_bf16(zl::bits_float(0xFFFFFFFFu)))));

  for (std::uint32_t bits = 0; bits <= 0xFFFF; ++bits) {  // every bf16 survives a round trip
    const zl::Bf16 h{static_cast<std::uint16_t>(bits)};
    const float f = zl::bf16_to_float(h);
    REQUIRE(zl::float_bits(f) == bits << 16);
    if (!std::isnan(f)) REQUIRE(zl::float_to_bf16(f).bits == bits);
  }
}

TEST_CASE("split_master/join_master restore every fp32 exactly (Note [Remainders])",
          "[base][bf16]") {
  const std::vector<std::uint32_t> patterns = sample_patterns();
  std::int64_t inexact = 0, not_nearest = 0, differs_from_rne_off_tie = 0, bad_sign = 0;
  for (const std::uint32_t u : patterns) {
    const zl::SplitMaster s = zl::split_master(zl::bits_float(u));
    if (zl::float_bits(zl::join_master(s.hi, s.lo)) != u) ++inexact;
    if (is_nan_bits(u)) continue;
    // hi is the nearest bf16; at an exact tie it is the one farther from zero.
    const std::uint32_t t = u & 0xFFFF0000u;
    const std::uint32_t low = u & 0xFFFFu;
    const std::uint16_t expected =
        static_cast<std::uint16_t>((t >> 16) + (low >= 0x8000u ? 1u : 0u));
    if (s.hi.bits != expected) ++not_nearest;
    if (low != 0x8000u && s.hi.bits != reference_rne(u)) ++differs_from_rne_off_tie;
    if ((s.lo < 0) != (low >= 0x8000u)) ++bad_sign;  // lo < 0 exactly when hi was rounded up
  }
  INFO(patterns.size() << " patterns");
  CHECK(inexact == 0);
  CHECK(not_nearest == 0);
  CHECK(differs_from_rne_off_tie == 0);
  CHECK(bad_sign == 0);
  CHECK(zl::master_to_bf16(zl::bits_float(0x3F808000u)).bits == 0x3F81);  // tie: away from zero
  CHECK(zl::master_to_bf16(zl::bits_float(0xBF808000u)).bits == 0xBF81);
  // The wrap-around cases: the top pattern (a NaN) and the largest finite fp32 (hi is +inf).
  for (const std::uint32_t u : {0xFFFFFFFFu, 0xFFFF8000u, 0x7F7FFFFFu, 0xFF7FFFFFu, 0x80000000u}) {
    const zl::SplitMaster s = zl::split_master(zl::bits_float(u));
    CHECK(zl::float_bits(zl::join_master(s.hi, s.lo)) == u);
  }
}

TEST_CASE("random fp32 masters round-trip through split/join and stay near their bf16",
          "[base][bf16]") {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 0.05f);  // parameter-like magnitudes
  for (int i = 0; i < 200000; ++i) {
    const float x = dist(rng);
    const zl::SplitMaster s = zl::split_master(x);
    REQUIRE(zl::float_bits(zl::join_master(s.hi, s.lo)) == zl::float_bits(x));
    // bf16 keeps 8 significant bits: rounding to nearest errs by at most half an ulp, 2^-8
    // relative (the unit roundoff of bf16).
    REQUIRE(std::fabs(zl::bf16_to_float(s.hi) - x) <= std::ldexp(std::fabs(x), -8));
  }
}
