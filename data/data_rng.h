// The data pipeline's own random numbers: splitmix64 seeding a xoshiro256** stream, with uniform,
// bounded-integer and Box-Muller normal draws. Integer outputs are fixed by the algorithms, so the
// same (seed, stream) gives the same numbers on every machine — unlike std:: distributions, whose
// output is implementation-defined. Internal to models/ (synthetic sets and the sampler).
#pragma once

#include <cmath>
#include <cstdint>

namespace zl {

// One step of splitmix64 (Vigna): advances `state` and returns a well-mixed 64-bit value.
inline std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// xoshiro256** (Blackman & Vigna). `stream` separates independent draws from one user seed
// (train vs test set, weights vs inputs, one epoch vs the next) without the user juggling seeds.
class DataRng {
 public:
  DataRng(std::uint64_t seed, std::uint64_t stream) {
    std::uint64_t sm = seed;
    std::uint64_t mixed = splitmix64(sm);
    // The stream goes through splitmix too, so streams 0, 1, 2 ... start far apart.
    std::uint64_t sm2 = stream ^ 0x6A09E667F3BCC909ull;
    sm = mixed ^ splitmix64(sm2);
    for (std::uint64_t& word : s_) word = splitmix64(sm);
  }

  std::uint64_t next_u64() {
    const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

  // Uniform integer in [0, bound), exactly unbiased (rejects the short top range).
  std::uint64_t below(std::uint64_t bound) {
    const std::uint64_t threshold = (0 - bound) % bound;  // 2^64 mod bound
    for (;;) {
      const std::uint64_t r = next_u64();
      if (r >= threshold) return r % bound;
    }
  }

  // Standard normal by Box-Muller, in double so that a 1-ulp difference between two libms' log or
  // cos reaches a float result only when it straddles a float rounding boundary (~2^-29 odds).
  double normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double u1 = 1.0 - uniform();  // (0, 1]: log stays finite
    const double u2 = uniform();
    const double radius = std::sqrt(-2.0 * std::log(u1));
    const double angle = 2.0 * 3.14159265358979323846 * u2;
    spare_ = radius * std::sin(angle);
    has_spare_ = true;
    return radius * std::cos(angle);
  }

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

  std::uint64_t s_[4];
  double spare_ = 0.0;
  bool has_spare_ = false;
};

}  // namespace zl
