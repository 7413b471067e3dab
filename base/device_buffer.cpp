// DeviceBuffer: an owned, zero-filled buffer of fp32 or bf16 elements, 64-byte aligned on the CPU (one cache line, and
// a full AVX-512 vector, so the optimizer loops never start mid-line) or cudaMalloc'ed on a GPU.
// CPU buffers of 2 MiB or more are backed by transparent huge pages where the kernel allows it
// (Note [Huge pages]).
// Count 0 holds no memory (data() == nullptr). Also the blocking host <-> buffer copies.
#include "base/device_buffer.h"

#include <cassert>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <utility>

#include <sys/mman.h>
#include <unistd.h>

#include "base/errors.h"
#if defined(ZEROLAP_WITH_CUDA)
#include "base/device_memory.h"
#endif

namespace zl {
namespace {

constexpr std::size_t kCpuAlignment = 64;

// Note [Huge pages]: the flat parameter and gradient buffers, the optimizer state and the tape's
// arena are allocated once and touched every step by GEMMs, the fused optimizer and the
// collectives. Shared-memory MPI (Open MPI's vader with CMA, where ptrace is permitted) copies a
// bucket between ranks with process_vm_readv, which looks up and pins the peer's pages; a 2 MiB
// page is found with one page-table walk instead of 512, and GEMM and optimizer loops miss the TLB
// less. Linux's default (transparent_hugepage = madvise) gives huge pages only to memory that
// asks, so a buffer of at least 2 MiB is a mapping of its own, 2 MiB-aligned and
// madvise(MADV_HUGEPAGE)d, and is unmapped when freed: its memory goes back to the system at once
// instead of staying in malloc's heap (the bench builds a trainer per mode, and peak memory per
// mode must not include the previous modes' leftovers; the gain is in docs/bench.md, "What it
// took to hide communication on 2 cores"). The mapping is the buffer's size rounded to a page,
// not to a huge page: the kernel backs each 2 MiB extent wholly inside it with a huge page and
// the tail with small ones, so the tail costs what it holds (rounded to 2 MiB, a bucket's state
// of 4.01 MiB took 6 MiB, a quarter more memory than `zerolap plan` counted for some models). The
// kernel zero-fills the pages at first touch, so their page faults fall in the first step
// rather than in the constructor. Where huge pages are off or unavailable, madvise fails or is
// ignored and the mapping has ordinary pages.
constexpr std::size_t kHugePage = std::size_t{2} << 20;

std::size_t page_size() {
  static const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

std::size_t byte_size(std::int64_t count, DType dtype) {
  const auto element = static_cast<std::size_t>(dtype_size(dtype));
  ZL_CHECK(static_cast<std::uint64_t>(count) <=
               (std::numeric_limits<std::size_t>::max() - 2 * kHugePage) / element,
           "DeviceBuffer: {} {} elements overflow size_t", count, dtype_name(dtype));
  return static_cast<std::size_t>(count) * element;
}

std::size_t round_up(std::size_t bytes, std::size_t multiple) {
  return (bytes + multiple - 1) / multiple * multiple;
}

bool is_mapping(std::size_t bytes) { return bytes >= kHugePage; }

void* map_huge_zeroed(std::size_t bytes) {
  const std::size_t length = round_up(bytes, page_size());
  // Map a huge page more than needed, then trim both ends so the rest starts on a 2 MiB boundary.
  void* raw = mmap(nullptr, length + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  char* const begin = static_cast<char*>(raw);
  char* const aligned = begin + (round_up(reinterpret_cast<std::uintptr_t>(begin), kHugePage) -
                                 reinterpret_cast<std::uintptr_t>(begin));
  if (aligned != begin) munmap(begin, static_cast<std::size_t>(aligned - begin));
  char* const end = begin + length + kHugePage;
  if (aligned + length != end) {
    munmap(aligned + length, static_cast<std::size_t>(end - aligned - length));
  }
#if defined(MADV_HUGEPAGE)
  madvise(aligned, length, MADV_HUGEPAGE);  // a hint: failure leaves ordinary pages
#endif
  return aligned;  // anonymous memory is zero-filled by the kernel
}

void* cpu_alloc_zeroed(std::size_t bytes) {
  if (is_mapping(bytes)) return map_huge_zeroed(bytes);
  // std::aligned_alloc requires the size to be a multiple of the alignment.
  const std::size_t rounded = round_up(bytes, kCpuAlignment);
  void* mem = std::aligned_alloc(kCpuAlignment, rounded);
  if (mem == nullptr) throw std::bad_alloc();
  std::memset(mem, 0, rounded);
  return mem;
}

// noexcept (destructor, move assignment): the size was checked when the buffer was allocated.
void release(void* data, std::int64_t count, DType dtype, DeviceKind device) noexcept {
  if (data == nullptr) return;
  if (device == DeviceKind::Cpu) {
    const std::size_t bytes = static_cast<std::size_t>(count * dtype_size(dtype));
    if (is_mapping(bytes)) {
      [[maybe_unused]] const int unmapped = munmap(data, round_up(bytes, page_size()));
      assert(unmapped == 0);  // the size is the one map_huge_zeroed mapped
    } else {
      std::free(data);
    }
    return;
  }
#if defined(ZEROLAP_WITH_CUDA)
  cuda_free(data);
#endif
  // Without CUDA no Cuda buffer can exist: the constructor throws before allocating one.
}

}  // namespace

DeviceBuffer::DeviceBuffer(DeviceKind device, std::int64_t count, DType dtype)
    : device_(device), dtype_(dtype) {
  ZL_CHECK(count >= 0, "DeviceBuffer: negative count {}", count);
  if (count == 0) return;
  const std::size_t bytes = byte_size(count, dtype);
  if (device == DeviceKind::Cuda) {
#if defined(ZEROLAP_WITH_CUDA)
    data_ = cuda_alloc_zeroed(bytes);
#else
    throw_built_without_cuda("DeviceBuffer");
#endif
  } else {
    data_ = cpu_alloc_zeroed(bytes);
  }
  count_ = count;
}

DeviceBuffer::~DeviceBuffer() { release(data_, count_, dtype_, device_); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      count_(std::exchange(other.count_, 0)),
      device_(other.device_),
      dtype_(other.dtype_) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    release(data_, count_, dtype_, device_);
    data_ = std::exchange(other.data_, nullptr);
    count_ = std::exchange(other.count_, 0);
    device_ = other.device_;
    dtype_ = other.dtype_;
  }
  return *this;
}

void DeviceBuffer::throw_dtype_mismatch(DType asked) const {
  throw InternalError(fmt::format("DeviceBuffer: a {} buffer ({} elements) read as {}",
                                  dtype_name(dtype_), count_, dtype_name(asked)));
}

void copy_bytes_to_host(const void* src, DeviceKind src_device, void* host_dst,
                        std::int64_t bytes) {
  ZL_CHECK(bytes >= 0, "copy_to_host: negative size {} bytes", bytes);
  if (bytes == 0) return;
  if (src_device == DeviceKind::Cuda) {
#if defined(ZEROLAP_WITH_CUDA)
    cuda_copy_to_host(src, host_dst, static_cast<std::size_t>(bytes));
    return;
#else
    throw_built_without_cuda("copy_to_host");
#endif
  }
  std::memmove(host_dst, src, static_cast<std::size_t>(bytes));
}

std::int64_t device_free_bytes(DeviceKind device) {
  if (device != DeviceKind::Cuda) return -1;
#if defined(ZEROLAP_WITH_CUDA)
  return cuda_free_bytes();
#else
  throw_built_without_cuda("device_free_bytes");
#endif
}

void copy_bytes_from_host(const void* host_src, void* dst, DeviceKind dst_device,
                          std::int64_t bytes) {
  ZL_CHECK(bytes >= 0, "copy_from_host: negative size {} bytes", bytes);
  if (bytes == 0) return;
  if (dst_device == DeviceKind::Cuda) {
#if defined(ZEROLAP_WITH_CUDA)
    cuda_copy_from_host(host_src, dst, static_cast<std::size_t>(bytes));
    return;
#else
    throw_built_without_cuda("copy_from_host");
#endif
  }
  std::memmove(dst, host_src, static_cast<std::size_t>(bytes));
}

}  // namespace zl
