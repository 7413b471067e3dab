// crc32_update (runtime/checkpoint/files/crc32.h) equals zlib's crc32 for every length around
// the fold's block sizes, at every alignment, continued from any CRC and split anywhere: a
// checkpoint written with one verifies with the other, and files written before it still verify.
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "runtime/checkpoint/files/crc32.h"

using zl::crc32_reference;
using zl::crc32_update;

namespace {

std::vector<unsigned char> random_bytes(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<unsigned char> out(n);
  for (auto& b : out) b = static_cast<unsigned char>(rng());
  return out;
}

}  // namespace

TEST_CASE("crc32_update: zlib's known values", "[crc32]") {
  const std::string check = "123456789";  // the CRC-32 check value of the catalogues
  CHECK(crc32_update(0, check.data(), check.size()) == 0xCBF43926u);
  CHECK(crc32_update(0, nullptr, 0) == 0u);
  // 64 bytes and more take the folded path where the CPU has it.
  const std::string zeros(1000, '\0');
  CHECK(crc32_update(0, zeros.data(), zeros.size()) ==
        crc32_reference(0, zeros.data(), zeros.size()));
}

TEST_CASE("crc32_update equals zlib for every length, alignment and starting CRC", "[crc32]") {
  INFO("folded with PCLMULQDQ on this CPU: " << zl::crc32_is_folded());
  const std::vector<unsigned char> data = random_bytes(4096 + 64, 7);
  for (std::size_t length = 0; length <= 1100; ++length) {
    for (const std::size_t offset : {0, 1, 5, 8, 15}) {
      for (const std::uint32_t start : {0u, 0xFFFFFFFFu, 0x12345678u}) {
        const std::uint32_t want = crc32_reference(start, data.data() + offset, length);
        const std::uint32_t got = crc32_update(start, data.data() + offset, length);
        if (got != want) {
          FAIL("length " << length << " offset " << offset << " start " << start << ": " << got
                         << " != " << want);
        }
      }
    }
  }
}

TEST_CASE("crc32_update continues across any split like zlib", "[crc32]") {
  const std::vector<unsigned char> data = random_bytes(3 << 20, 11);
  const std::uint32_t whole = crc32_reference(0, data.data(), data.size());
  CHECK(crc32_update(0, data.data(), data.size()) == whole);
  std::mt19937 rng(3);
  for (int trial = 0; trial < 20; ++trial) {
    std::size_t at = 0;
    std::uint32_t crc = 0;
    while (at < data.size()) {
      const std::size_t n = std::min<std::size_t>(data.size() - at, rng() % 300000);
      crc = crc32_update(crc, data.data() + at, n);
      at += n;
    }
    REQUIRE(crc == whole);
  }
}

TEST_CASE("parse_crc_hex reads what crc_hex writes, and nothing else", "[crc32]") {
  for (const std::uint32_t crc : {0u, 0x1f2e3d4cu, 0xffffffffu}) {
    CHECK(zl::parse_crc_hex(zl::crc_hex(crc)) == crc);
  }
  for (const char* bad :
       {"1F2E3D4C", "1f2e3d4", "1f2e3d4c0", "+1f2e3d4", " 1f2e3d4", "", "0x1f2e3d"}) {
    INFO(bad);
    CHECK_FALSE(zl::parse_crc_hex(bad).has_value());
  }
}
