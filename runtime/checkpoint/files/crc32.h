// crc32_update: zlib's CRC-32 (the gzip polynomial, as zlib's crc32() and Python's zlib.crc32
// compute it), at memory speed where the CPU multiplies carry-less (PCLMULQDQ).
//
// Note [Fast CRC-32]: every byte of a checkpoint goes through the CRC once when it is written and
// once when it is verified. zlib's table-driven crc32 runs at about 4 GB/s here, so on 2 ranks
// filling 2 cores the CRC of an async checkpoint's 50 MB took 12 ms of CPU away from training per
// checkpoint, about 3% of a run that checkpoints every 10 steps (docs/checkpoints.md). Folding 64
// bytes at a time with carry-less multiplication (Intel's "Fast CRC Computation for Generic
// Polynomials Using PCLMULQDQ", 2009) computes the same value several times faster. The fold
// keeps four 128-bit lanes congruent to the data read so far, shifted to where its CRC is
// taken; the last lane and the bytes after it go through zlib. The fold constants are
// x^n mod P (bit-reflected, times x), computed at compile time from the polynomial. Without
// PCLMULQDQ (checked at run time) or for short inputs it is zlib's crc32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace zl {

// The CRC-32 of `bytes` at `data` continuing `crc` (0 to start): zlib's crc32(crc, data, bytes).
std::uint32_t crc32_update(std::uint32_t crc, const void* data, std::size_t bytes);

// zlib's crc32 alone (the reference the fast path is tested against).
std::uint32_t crc32_reference(std::uint32_t crc, const void* data, std::size_t bytes);

// Whether crc32_update folds with PCLMULQDQ on this CPU.
bool crc32_is_folded();

// A CRC as checkpoints and messages write it: 8 lower-case hex digits.
std::string crc_hex(std::uint32_t crc);
// The CRC crc_hex wrote; nullopt for anything else (upper case too: both file formats read one
// spelling, the one they write).
std::optional<std::uint32_t> parse_crc_hex(std::string_view hex);

}  // namespace zl
