// The OpenMP team size the CPU kernels run on now: at most the count they are given
// (runtime.threads resolved), lowered between training steps while other processes hold the CPUs
// (Note [Adaptive CPU team], runtime/cli/cpu_team_governor.cpp). The element-wise kernels give
// the same bits on any team; a GEMM runs on the lower team only where that gives the bits of the
// full one (kernels/gemm.cpp checks each shape once).
#pragma once

namespace zl {

// 0 (the default): no limit. Set by the main thread between steps; read by every kernel.
void set_cpu_team_limit(int limit);
int cpu_team_limit();

// The threads a kernel asked to run on `threads` uses now: min(threads, limit), at least 1.
int cpu_team_threads(int threads);

}  // namespace zl
