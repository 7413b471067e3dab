// The x86-64 instruction-set level of this CPU, read from CPUID (and what the OS enables, XCR0),
// on the ladder oneDNN dispatches on. kernels/gemm_info.h compares it with the GEMM kernel in use.
// Levels are ordered: a kernel for a lower level runs on a higher one, only slower.
#pragma once

#include <optional>
#include <string_view>

namespace zl {

enum class CpuIsa {
  Baseline,        // x86-64 without AVX (SSE4.1 at most), or not x86-64
  Avx,             // AVX (Sandy Bridge)
  Avx2,            // AVX2 + FMA (Haswell, Zen 1-3)
  Avx512Core,      // AVX-512 F, BW, DQ, VL (Skylake-SP)
  Avx512CoreVnni,  // + VNNI (Cascade Lake)
  Avx512CoreBf16,  // + AVX512-BF16 (Cooper Lake, Zen 4)
  Avx512CoreAmx,   // + AMX-BF16/INT8 tiles, usable by this process (Sapphire Rapids)
};

// Detected once per process. AMX counts only when Linux grants this process the tile state
// (arch_prctl ARCH_REQ_XCOMP_PERM), as oneDNN requires before it uses AMX.
CpuIsa detect_cpu_isa();

// "baseline", "avx", "avx2", "avx512_core", "avx512_core_vnni", "avx512_core_bf16",
// "avx512_core_amx": oneDNN's names for the same levels.
std::string_view cpu_isa_name(CpuIsa isa);

// The highest level whose name appears in `text` (e.g. a oneDNN implementation name such as
// "brg:avx512_core"); nullopt when it names none.
std::optional<CpuIsa> cpu_isa_named_in(std::string_view text);

}  // namespace zl
