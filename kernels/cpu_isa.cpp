// detect_cpu_isa: CPUID leaves 1 and 7 for the instruction sets, XGETBV for the register state the
// OS saves (AVX needs XCR0 bits 1-2, AVX-512 bits 5-7, AMX bits 17-18), as the Intel SDM
// prescribes: a CPU flag without its OS state would fault on first use.
#include "kernels/cpu_isa.h"

#include <array>
#include <cctype>
#include <cstdint>

#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace zl {
namespace {

#if defined(__x86_64__)
struct Regs {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
};

Regs cpuid(unsigned leaf, unsigned subleaf) {
  Regs r;
  if (!__get_cpuid_count(leaf, subleaf, &r.eax, &r.ebx, &r.ecx, &r.edx)) return Regs{};
  return r;
}

std::uint64_t xcr0() {
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<std::uint64_t>(hi) << 32) | lo;
}

bool bit(unsigned reg, int b) { return (reg >> b) & 1u; }

// Linux >= 5.16 hands out the AMX tile data state per process on request (XFD).
bool amx_permitted() {
  constexpr int kArchReqXcompPerm = 0x1023;
  constexpr int kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

CpuIsa detect() {
  const Regs l1 = cpuid(1, 0);
  const bool osxsave = bit(l1.ecx, 27);
  if (!osxsave || !bit(l1.ecx, 28)) return CpuIsa::Baseline;  // no AVX, or no XGETBV
  const std::uint64_t xcr = xcr0();
  if ((xcr & 0x6) != 0x6) return CpuIsa::Baseline;  // the OS does not save YMM state
  const Regs l7 = cpuid(7, 0);
  if (!bit(l7.ebx, 5) || !bit(l1.ecx, 12)) return CpuIsa::Avx;  // AVX2 and FMA
  const bool zmm_state = (xcr & 0xe0) == 0xe0;
  const bool avx512_core = bit(l7.ebx, 16) && bit(l7.ebx, 17) && bit(l7.ebx, 30) &&
                           bit(l7.ebx, 31);  // F, DQ, BW, VL
  if (!zmm_state || !avx512_core) return CpuIsa::Avx2;
  if (!bit(l7.ecx, 11)) return CpuIsa::Avx512Core;  // AVX512-VNNI
  const Regs l7_1 = cpuid(7, 1);
  if (!bit(l7_1.eax, 5)) return CpuIsa::Avx512CoreVnni;  // AVX512-BF16
  const bool amx = bit(l7.edx, 22) && bit(l7.edx, 24) && bit(l7.edx, 25);  // BF16, TILE, INT8
  if (!amx || (xcr & 0x60000) != 0x60000 || !amx_permitted()) return CpuIsa::Avx512CoreBf16;
  return CpuIsa::Avx512CoreAmx;
}
#else
CpuIsa detect() { return CpuIsa::Baseline; }
#endif

constexpr std::array<std::string_view, 7> kNames = {
    "baseline", "avx", "avx2", "avx512_core", "avx512_core_vnni", "avx512_core_bf16",
    "avx512_core_amx"};

}  // namespace

CpuIsa detect_cpu_isa() {
  static const CpuIsa isa = detect();
  return isa;
}

std::string_view cpu_isa_name(CpuIsa isa) { return kNames[static_cast<std::size_t>(isa)]; }

std::optional<CpuIsa> cpu_isa_named_in(std::string_view text) {
  // From the highest level down, so "avx512_core_bf16" is not read as "avx512_core" or "avx".
  for (int i = static_cast<int>(kNames.size()) - 1; i >= 1; --i) {
    const std::string_view name = kNames[static_cast<std::size_t>(i)];
    for (std::size_t pos = text.find(name); pos != std::string_view::npos;
         pos = text.find(name, pos + 1)) {
      // A whole name: not followed by more of a longer one ("avx" in "avx2", "avx512...").
      const std::size_t end = pos + name.size();
      const bool whole = end == text.size() || !(text[end] == '_' || std::isalnum(
                                                     static_cast<unsigned char>(text[end])));
      if (whole) return static_cast<CpuIsa>(i);
    }
  }
  return std::nullopt;
}

}  // namespace zl
