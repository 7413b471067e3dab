// The two kernels of the simulated link on a CUDA stream (Note [Link on the device],
// runtime/comm/link/simulated_link.h). Built only with ZEROLAP_WITH_CUDA; kept free of C++20
// headers because the .cu side compiles as C++17. Times are the GPU's global timer in nanoseconds.
#pragma once

#include <cstdint>

namespace zl {

// When `stream` reaches it: begin = max(now, *busy_until), *busy_until = *slot_end = begin +
// duration_ns (atomically: a rank's two comm streams share busy_until, FIFO).
void launch_link_reserve(void* stream, std::uint64_t* busy_until, std::uint64_t* slot_end,
                         std::uint64_t duration_ns);
// Holds `stream` until the GPU's clock passes *slot_end (one thread, sleeping between reads).
void launch_link_wait(void* stream, const std::uint64_t* slot_end);

}  // namespace zl
