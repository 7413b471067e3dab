// ZL_CPU_CLONES: marks a CPU loop to be compiled once per x86-64 level and picked at load time.
//
// Note [ISA clones]: zerolap is built for the x86-64 baseline (SSE2), so a loop the compiler
// vectorises runs 4 floats wide even on an AVX-512 CPU. A function marked ZL_CPU_CLONES is
// compiled three times, for x86-64-v4 (AVX-512), x86-64-v3 (AVX2 + FMA) and the baseline, and the
// dynamic loader binds its name to the best one the CPU runs (GCC's target_clones, an ifunc);
// `flatten` inlines every loop it calls into each clone, so they get the wider vectors too.
// - The clones compute the same bits: kernels/ is built with -ffp-contract=off, so no clone fuses
//   a multiply and an add that the baseline rounds twice, and IEEE sqrt and division are
//   correctly rounded at every width (tests/kernels/test_optimizer_kernels.cpp checks the steps
//   against the scalar element functions).
// - A clone's own pointer parameters must carry __restrict: the loops inlined into it lose their
//   callee's, and without it the compiler must assume the buffers alias, so the wide clone does
//   not pay.
// - The fused fp32 Adam step is compute-bound at 4 floats per instruction (two divisions and a
//   square root per element), which the wider clones relieve (the bench's optimizer phase:
//   docs/bench.md, "Against PyTorch", where the time goes).
// GCC on x86-64 only: clang builds (the sanitizer builds) and other CPUs run the baseline build.
#pragma once

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define ZL_CPU_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"), flatten))
#else
#define ZL_CPU_CLONES
#endif
