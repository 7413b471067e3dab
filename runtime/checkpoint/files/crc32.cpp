// zlib's CRC-32, folded with carry-less multiplication where the CPU has it (see crc32.h).
#include "runtime/checkpoint/files/crc32.h"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <charconv>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace zl {

std::uint32_t crc32_reference(std::uint32_t crc, const void* data, std::size_t bytes) {
  const auto* p = static_cast<const Bytef*>(data);
  while (bytes > 0) {  // zlib's length is a uInt
    const auto n = static_cast<uInt>(std::min<std::size_t>(bytes, 1u << 30));
    crc = static_cast<std::uint32_t>(crc32(crc, p, n));
    p += n;
    bytes -= n;
  }
  return crc;
}

#if defined(__x86_64__)

namespace {

// x^n mod P for the CRC-32 polynomial P, bit-reflected (as the data is) and times x (the
// carry-less product of two reflected values comes out one bit short).
constexpr std::uint64_t fold_constant(int n) {
  constexpr std::uint64_t kPolynomial = 0x104C11DB7;
  std::uint64_t r = 1;
  for (int i = 0; i < n; ++i) {
    r <<= 1;
    if (r >> 32 & 1) r ^= kPolynomial;
  }
  std::uint64_t reflected = 0;
  for (int i = 0; i < 32; ++i) reflected |= (r >> i & 1) << (31 - i);
  return reflected << 1;
}

// Moving a lane forward by 512 bits (four lanes) and by 128 bits (one lane): its first 8 bytes
// are multiplied by x^(d+32), its last 8 by x^(d-32) (the halves are 64 bits apart).
constexpr std::uint64_t kFold512Low = fold_constant(4 * 128 + 32);
constexpr std::uint64_t kFold512High = fold_constant(4 * 128 - 32);
constexpr std::uint64_t kFold128Low = fold_constant(128 + 32);
constexpr std::uint64_t kFold128High = fold_constant(128 - 32);
// The published values (Intel's paper; the Linux kernel's crc32-pclmul), as a check of the above.
static_assert(kFold512Low == 0x154442bd4 && kFold512High == 0x1c6e41596);
static_assert(kFold128Low == 0x1751997d0 && kFold128High == 0x0ccaa009e);

__attribute__((target("pclmul,sse4.1"))) inline __m128i fold(__m128i lane, __m128i constants,
                                                            __m128i next) {
  const __m128i low = _mm_clmulepi64_si128(lane, constants, 0x00);
  const __m128i high = _mm_clmulepi64_si128(lane, constants, 0x11);
  return _mm_xor_si128(_mm_xor_si128(low, high), next);
}

// bytes >= 64.
__attribute__((target("pclmul,sse4.1"))) std::uint32_t crc32_folded(std::uint32_t crc,
                                                                    const unsigned char* p,
                                                                    std::size_t bytes) {
  const auto load = [](const unsigned char* at) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(at));
  };
  // zlib's register starts as ~crc; a register's effect is that of xoring it into the next 4
  // bytes of the data.
  __m128i x0 = _mm_xor_si128(load(p), _mm_cvtsi32_si128(static_cast<int>(~crc)));
  __m128i x1 = load(p + 16), x2 = load(p + 32), x3 = load(p + 48);
  p += 64;
  bytes -= 64;
  const __m128i by512 = _mm_set_epi64x(static_cast<long long>(kFold512High),
                                       static_cast<long long>(kFold512Low));
  while (bytes >= 64) {
    x0 = fold(x0, by512, load(p));
    x1 = fold(x1, by512, load(p + 16));
    x2 = fold(x2, by512, load(p + 32));
    x3 = fold(x3, by512, load(p + 48));
    p += 64;
    bytes -= 64;
  }
  const __m128i by128 = _mm_set_epi64x(static_cast<long long>(kFold128High),
                                       static_cast<long long>(kFold128Low));
  __m128i x = fold(fold(fold(x0, by128, x1), by128, x2), by128, x3);
  while (bytes >= 16) {
    x = fold(x, by128, load(p));
    p += 16;
    bytes -= 16;
  }
  // x is congruent to everything read so far, placed as the last 16 bytes before p with a zero
  // register: its CRC from the register ~0 (zlib's crc32(~0u, ...) starts from register 0),
  // then the rest.
  alignas(16) unsigned char last[16];
  _mm_store_si128(reinterpret_cast<__m128i*>(last), x);
  const std::uint32_t folded = crc32_reference(0xFFFFFFFFu, last, sizeof last);
  return crc32_reference(folded, p, bytes);
}

}  // namespace

bool crc32_is_folded() {
  static const bool has = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
  return has;
}

std::uint32_t crc32_update(std::uint32_t crc, const void* data, std::size_t bytes) {
  if (bytes < 64 || !crc32_is_folded()) return crc32_reference(crc, data, bytes);
  return crc32_folded(crc, static_cast<const unsigned char*>(data), bytes);
}

#else

bool crc32_is_folded() { return false; }

std::uint32_t crc32_update(std::uint32_t crc, const void* data, std::size_t bytes) {
  return crc32_reference(crc, data, bytes);
}

#endif

std::string crc_hex(std::uint32_t crc) { return fmt::format("{:08x}", crc); }

std::optional<std::uint32_t> parse_crc_hex(std::string_view hex) {
  if (hex.size() != 8 || hex.find_first_not_of("0123456789abcdef") != std::string_view::npos) {
    return std::nullopt;
  }
  std::uint32_t value = 0;
  std::from_chars(hex.data(), hex.data() + hex.size(), value, 16);
  return value;
}

}  // namespace zl
