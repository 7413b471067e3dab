// DeviceBuffer on the CPU: zero-filled, 64-byte aligned (2 MiB from 2 MiB on, for huge pages, and
// mapped to the end of its last page), empty buffers hold no memory, moves transfer ownership; the
// host copies; and a CUDA buffer is a user error in a CPU-only build.
#include <catch2/catch.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <utility>
#include <vector>

#include "base/bf16.h"
#include "base/device_buffer.h"
#include "base/errors.h"

TEST_CASE("DeviceBuffer on the CPU", "[kernels][device_buffer]") {
  for (const std::int64_t n : {1, 3, 16, 1031}) {
    zl::DeviceBuffer buf(zl::DeviceKind::Cpu, n);
    INFO("n=" << n);
    REQUIRE(buf.data() != nullptr);
    CHECK(buf.size() == n);
    CHECK(buf.device() == zl::DeviceKind::Cpu);
    CHECK(reinterpret_cast<std::uintptr_t>(buf.data()) % 64 == 0);
    for (std::int64_t i = 0; i < n; ++i) REQUIRE(buf.data()[i] == 0.0f);

    std::vector<float> host(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) host[i] = static_cast<float>(i) + 0.5f;
    zl::copy_from_host(host.data(), buf.data(), zl::DeviceKind::Cpu, n);
    std::vector<float> back(static_cast<std::size_t>(n), -1.0f);
    zl::copy_to_host(buf.data(), zl::DeviceKind::Cpu, back.data(), n);
    CHECK(back == host);

    float* const raw = buf.data();
    zl::DeviceBuffer moved(std::move(buf));
    CHECK(moved.data() == raw);
    CHECK(moved.size() == n);
    CHECK(buf.data() == nullptr);  // NOLINT(bugprone-use-after-move): the moved-from state is specified
    CHECK(buf.size() == 0);
    zl::DeviceBuffer assigned(zl::DeviceKind::Cpu, 5);
    assigned = std::move(moved);  // frees the 5 floats, takes raw
    CHECK(assigned.data() == raw);
    CHECK(assigned.size() == n);
  }
  zl::DeviceBuffer empty(zl::DeviceKind::Cpu, 0);
  CHECK(empty.data() == nullptr);
  CHECK(empty.size() == 0);
  zl::DeviceBuffer defaulted;
  CHECK(defaulted.data() == nullptr);
  REQUIRE_THROWS_AS(zl::DeviceBuffer(zl::DeviceKind::Cpu, -1), zl::InternalError);
}

TEST_CASE("a bf16 DeviceBuffer holds 2-byte elements; the typed views check the dtype",
          "[kernels][device_buffer]") {
  for (const std::int64_t n : {1, 3, 16, 1031}) {
    INFO("n=" << n);
    zl::DeviceBuffer buf(zl::DeviceKind::Cpu, n, zl::DType::BF16);
    CHECK(buf.dtype() == zl::DType::BF16);
    CHECK(buf.size() == n);
    CHECK(buf.bytes() == 2 * n);
    zl::Bf16* const p = buf.data<zl::Bf16>();
    REQUIRE(p != nullptr);
    CHECK(static_cast<void*>(p) == buf.raw());
    CHECK(reinterpret_cast<std::uintptr_t>(p) % 64 == 0);
    for (std::int64_t i = 0; i < n; ++i) REQUIRE(p[i].bits == 0);
    // The fp32 view of a bf16 buffer (and the reverse) is a bug, not a reinterpretation.
    REQUIRE_THROWS_AS(buf.data(), zl::InternalError);
    REQUIRE_THROWS_AS(buf.data<float>(), zl::InternalError);
    zl::DeviceBuffer f32(zl::DeviceKind::Cpu, n);
    CHECK(f32.dtype() == zl::DType::F32);
    CHECK(f32.bytes() == 4 * n);
    REQUIRE_THROWS_AS(f32.data<zl::Bf16>(), zl::InternalError);

    std::vector<zl::Bf16> host(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) host[i] = zl::float_to_bf16(0.25f * static_cast<float>(i));
    zl::copy_from_host(host.data(), p, zl::DeviceKind::Cpu, n);
    std::vector<zl::Bf16> back(static_cast<std::size_t>(n), zl::Bf16{0xFFFF});
    zl::copy_to_host(buf.data<zl::Bf16>(), zl::DeviceKind::Cpu, back.data(), n);
    for (std::int64_t i = 0; i < n; ++i) REQUIRE(back[i].bits == host[i].bits);

    zl::DeviceBuffer moved(std::move(buf));
    CHECK(moved.dtype() == zl::DType::BF16);
    CHECK(moved.data<zl::Bf16>() == p);
    zl::DeviceBuffer assigned(zl::DeviceKind::Cpu, 5);
    assigned = std::move(moved);
    CHECK(assigned.dtype() == zl::DType::BF16);
    CHECK(assigned.data<zl::Bf16>() == p);
  }
  zl::DeviceBuffer empty(zl::DeviceKind::Cpu, 0, zl::DType::BF16);
  CHECK(empty.data<zl::Bf16>() == nullptr);
  CHECK(empty.bytes() == 0);
}

TEST_CASE("DeviceBuffers of 2 MiB and more start on a 2 MiB boundary (Note [Huge pages])",
          "[kernels][device_buffer]") {
  constexpr std::int64_t kHugePageFloats = (2 << 20) / 4;
  for (const std::int64_t n : {kHugePageFloats, kHugePageFloats + 1, 3 * kHugePageFloats / 2}) {
    INFO("n=" << n);
    zl::DeviceBuffer buf(zl::DeviceKind::Cpu, n);
    CHECK(reinterpret_cast<std::uintptr_t>(buf.data()) % (2 << 20) == 0);
    bool zero = true;
    for (std::int64_t i = 0; i < n; ++i) zero = zero && buf.data()[i] == 0.0f;
    CHECK(zero);
    buf.data()[n - 1] = 1.0f;  // the whole extent is usable
  }
}

// The mapping ends at the page after the buffer, not at the next 2 MiB: a bucket's state just
// over a multiple of 2 MiB made its tail a whole huge page (up to 2 MiB resident beyond its size).
TEST_CASE("a large DeviceBuffer maps its size rounded to a page, not to a huge page",
          "[kernels][device_buffer]") {
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  for (const std::size_t bytes : {(std::size_t{2} << 20) + 4, (std::size_t{4} << 20) + page + 8}) {
    INFO("bytes=" << bytes);
    zl::DeviceBuffer buf(zl::DeviceKind::Cpu, static_cast<std::int64_t>(bytes / 4));
    char* const base = static_cast<char*>(buf.raw());
    const std::size_t mapped = (bytes / 4 * 4 + page - 1) / page * page;
    CHECK(msync(base + mapped - page, page, MS_ASYNC) == 0);  // the last page is there
    errno = 0;
    CHECK(msync(base + mapped, page, MS_ASYNC) == -1);  // and nothing after it
    CHECK(errno == ENOMEM);
  }
}

TEST_CASE("a large DeviceBuffer's memory is unmapped when it is freed or replaced",
          "[kernels][device_buffer]") {
  constexpr std::size_t kMapped = std::size_t{3} << 20;  // a multiple of the page: all mapped
  zl::DeviceBuffer buf(zl::DeviceKind::Cpu, (3 << 20) / 4);
  void* const old = buf.data();
  REQUIRE(msync(old, kMapped, MS_ASYNC) == 0);  // mapped
  buf = zl::DeviceBuffer(zl::DeviceKind::Cpu, 16);
  // Neither the first nor the last page of the old range is mapped any more (a short munmap
  // would leave the tail).
  constexpr std::size_t kPage = 4096;
  for (const std::size_t offset : {std::size_t{0}, kMapped - kPage}) {
    errno = 0;
    CHECK(msync(static_cast<char*>(old) + offset, kPage, MS_ASYNC) == -1);
    CHECK(errno == ENOMEM);
  }
  // The same for a bf16 buffer of 3 MiB: its size in bytes, not in elements, decides the mapping.
  zl::DeviceBuffer half(zl::DeviceKind::Cpu, (3 << 20) / 2, zl::DType::BF16);
  void* const old_half = half.raw();
  CHECK(reinterpret_cast<std::uintptr_t>(old_half) % (2 << 20) == 0);
  REQUIRE(msync(old_half, kMapped, MS_ASYNC) == 0);
  half = zl::DeviceBuffer(zl::DeviceKind::Cpu, 16, zl::DType::BF16);
  for (const std::size_t offset : {std::size_t{0}, kMapped - kPage}) {
    errno = 0;
    CHECK(msync(static_cast<char*>(old_half) + offset, kPage, MS_ASYNC) == -1);
    CHECK(errno == ENOMEM);
  }
}

#if !defined(ZEROLAP_WITH_CUDA)
TEST_CASE("DeviceBuffer refuses CUDA in a CPU-only build", "[kernels][device_buffer]") {
  REQUIRE_THROWS_WITH(zl::DeviceBuffer(zl::DeviceKind::Cuda, 4),
                      Catch::Matchers::Contains("built without CUDA"));
  // An empty CUDA buffer allocates nothing, so it is harmless even without CUDA.
  zl::DeviceBuffer empty(zl::DeviceKind::Cuda, 0);
  CHECK(empty.data() == nullptr);
}
#endif
