// The CPU GEMM runs a kernel for this CPU's instruction set: the CPU level read from CPUID agrees
// with /proc/cpuinfo, and the level of the f32 kernel oneDNN picked is not below the best f32 level
// for the CPU. Structural, not timed: it fails on a machine where the library falls back to an
// older kernel (an unknown CPU, ONEDNN_MAX_CPU_ISA set, a library older than the CPU).
#include <catch2/catch.hpp>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "kernels/cpu_isa.h"
#include "kernels/gemm_info.h"

namespace {

using zl::CpuIsa;

// The level /proc/cpuinfo's flags imply (Linux lists a flag only when it is usable); nullopt
// where there is no /proc/cpuinfo.
std::optional<CpuIsa> level_from_proc_cpuinfo() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    std::set<std::string> f;
    for (std::string w; words >> w;) f.insert(w);
    const auto has = [&](const char* name) { return f.count(name) > 0; };
    if (!has("avx")) return CpuIsa::Baseline;
    if (!has("avx2") || !has("fma")) return CpuIsa::Avx;
    if (!(has("avx512f") && has("avx512dq") && has("avx512bw") && has("avx512vl"))) {
      return CpuIsa::Avx2;
    }
    if (!has("avx512_vnni")) return CpuIsa::Avx512Core;
    if (!has("avx512_bf16")) return CpuIsa::Avx512CoreVnni;
    if (!(has("amx_bf16") && has("amx_tile") && has("amx_int8"))) return CpuIsa::Avx512CoreBf16;
    return CpuIsa::Avx512CoreAmx;
  }
  return std::nullopt;
}

}  // namespace

TEST_CASE("the CPU's instruction-set level from CPUID agrees with /proc/cpuinfo", "[kernels][gemm]") {
  const std::optional<CpuIsa> expected = level_from_proc_cpuinfo();
  if (!expected) {
    WARN("no /proc/cpuinfo flags here: nothing to compare with");
    return;
  }
  const CpuIsa detected = zl::detect_cpu_isa();
  INFO("CPUID: " << zl::cpu_isa_name(detected) << ", /proc/cpuinfo: " << zl::cpu_isa_name(*expected));
  if (*expected == CpuIsa::Avx512CoreAmx) {
    // AMX also needs the kernel to grant this process the tile state (arch_prctl).
    CHECK((detected == CpuIsa::Avx512CoreAmx || detected == CpuIsa::Avx512CoreBf16));
  } else {
    CHECK(detected == *expected);
  }
}

TEST_CASE("the CPU GEMM's kernel is not for an older instruction set than the CPU's",
          "[kernels][gemm]") {
  const zl::CpuGemmInfo& info = zl::cpu_gemm_info();
  INFO("CPU GEMM: " << zl::describe_cpu_gemm(info));
  CHECK_THAT(info.library, Catch::StartsWith("oneDNN "));
  CHECK(info.f32_kernel_isa >= zl::best_f32_gemm_isa(info.cpu));
  CHECK(info.dispatch >= info.cpu);
  CHECK(zl::cpu_gemm_shortfall(info).empty());
}

TEST_CASE("a kernel for an older instruction set is reported", "[kernels][gemm]") {
  zl::CpuGemmInfo info;
  info.library = "oneDNN 9.9.9";
  info.cpu = CpuIsa::Avx512CoreBf16;
  info.dispatch = CpuIsa::Avx512CoreBf16;
  info.f32_kernel = "brg:avx512_core";
  info.f32_kernel_isa = CpuIsa::Avx512Core;
  CHECK(zl::cpu_gemm_shortfall(info).empty());  // f32 has no BF16 kernel to miss

  info.f32_kernel = "jit:avx2";
  info.f32_kernel_isa = CpuIsa::Avx2;
  CHECK_THAT(zl::cpu_gemm_shortfall(info),
             Catch::Contains("f32 kernel for avx2") && Catch::Contains("avx512_core_bf16"));

  info.dispatch = CpuIsa::Avx2;  // capped below the CPU, as ONEDNN_MAX_CPU_ISA=AVX2 does
  CHECK_THAT(zl::cpu_gemm_shortfall(info), Catch::Contains("ONEDNN_MAX_CPU_ISA"));

  info.f32_kernel = "brg:avx512_core";
  info.f32_kernel_isa = CpuIsa::Avx512Core;
  info.dispatch = CpuIsa::Avx512Core;  // f32 is fine, but the bf16 kernels are capped
  CHECK_THAT(zl::cpu_gemm_shortfall(info), Catch::Contains("dispatches only up to avx512_core"));

  info.cpu = CpuIsa::Avx2;  // an AVX2 machine running an AVX2 kernel
  info.dispatch = CpuIsa::Avx2;
  info.f32_kernel_isa = CpuIsa::Avx2;
  CHECK(zl::cpu_gemm_shortfall(info).empty());
}

TEST_CASE("instruction-set names are read whole from oneDNN implementation names",
          "[kernels][gemm]") {
  CHECK(zl::cpu_isa_named_in("brg:avx512_core") == CpuIsa::Avx512Core);
  CHECK(zl::cpu_isa_named_in("brg:avx512_core_bf16") == CpuIsa::Avx512CoreBf16);
  CHECK(zl::cpu_isa_named_in("brg:avx512_core_amx") == CpuIsa::Avx512CoreAmx);
  CHECK(zl::cpu_isa_named_in("jit:avx2") == CpuIsa::Avx2);
  CHECK(zl::cpu_isa_named_in("jit:avx") == CpuIsa::Avx);
  CHECK(zl::cpu_isa_named_in("gemm:jit") == std::nullopt);
  CHECK(zl::cpu_isa_named_in("ref:any") == std::nullopt);
  CHECK(zl::cpu_isa_name(CpuIsa::Avx512CoreVnni) == "avx512_core_vnni");
}
