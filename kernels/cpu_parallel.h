// for_chunks: how a CPU kernel splits a loop across the compute thread's OpenMP team.
//
// Runs fn(begin, end) over [0, n) split into up to `threads` contiguous chunks on an OpenMP team:
// the one oneDNN's GEMMs run on, whose threads are still spinning from the last GEMM, so the split
// costs no thread start and takes no core from anyone (a std::thread per chunk would share a core
// with a spinning OpenMP thread; docs/bench.md, "Splitting the CPU kernels across threads").
// A chunk is at least kMinChunkElements elements and every boundary but n is a multiple of
// `align` elements (16: a 64-byte line of fp32). Only for work whose result does not depend on
// where the chunks fall (element-wise updates, column sums over whole columns); a reduction splits
// at fixed blocks instead (sum_of_squares). Built without OpenMP (sanitizer builds, files compiled
// without -fopenmp) the chunks run in turn on the calling thread, with the same bits. fn must not
// throw: the callers check their arguments first. The team is at most cpu_team_threads(threads)
// (kernels/cpu_team.h): the split never changes a result, so it may shrink between steps.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/cpu_team.h"

namespace zl {

inline constexpr std::int64_t kMinChunkElements = std::int64_t{1} << 16;

template <class Fn>
void for_chunks(int threads, std::int64_t n, const Fn& fn, std::int64_t align = 16,
                std::int64_t min_chunk = kMinChunkElements) {
  const auto parts =
      static_cast<int>(std::clamp<std::int64_t>(n / min_chunk, 1, cpu_team_threads(threads)));
  if (parts <= 1) return fn(std::int64_t{0}, n);
  const auto bound = [&](int i) { return i == parts ? n : (n * i / parts) / align * align; };
#pragma omp parallel for num_threads(parts) schedule(static, 1)
  for (int i = 0; i < parts; ++i) fn(bound(i), bound(i + 1));
}

}  // namespace zl
