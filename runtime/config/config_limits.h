// The upper bounds of config keys and command-line flags that no machine could honour past, and
// of the sizes derived from them. Each bound is far beyond any real run; its purpose is that every
// count, byte figure and duration computed from the config stays exact in an int64 (and a
// std::chrono duration), so a hostile value is exit 2 naming the key, never a wrap or a crash.
#pragma once

#include <cstdint>

namespace zl {

// Every byte figure derived from the config (activations, data, a bucket): 4 PiB.
inline constexpr std::int64_t kMaxDerivedBytes = std::int64_t{1} << 52;
// data.batch_size, data.eval_batch_size, data.train_samples, data.test_samples,
// data.teacher_hidden: 2^40 (a global batch of it times any world size stays in an int64).
inline constexpr std::int64_t kMaxSampleCount = std::int64_t{1} << 40;
// Ranks a plan may be made for (plan --world) and link.ranks: 2^20.
inline constexpr std::int64_t kMaxWorldSize = std::int64_t{1} << 20;
// parallel.bucket_cap_mb, parallel.first_bucket_cap_mb, bench.bucket_cap_mb: 1 TiB in MiB.
inline constexpr double kMaxBucketCapMb = 1024.0 * 1024.0;
// runtime.memory_limit_mb: 2^40 MiB (an exabyte), so its bytes fit an int64 with room.
inline constexpr double kMaxMemoryLimitMb = 1099511627776.0;
// parallel.prefetch: buckets gathered ahead (ZeRO stage 3); more than a few only adds resident
// gather buffers.
inline constexpr std::int64_t kMaxPrefetch = 64;
// train.grad_accum: micro-batches per step. The plan and the bench list every micro-batch's
// collectives of one step (stages 2 and 3 issue theirs in each), so the bound keeps that list
// small; 65536 micro-batches is far past any real step.
inline constexpr std::int64_t kMaxGradAccum = std::int64_t{1} << 16;
// runtime.timeout_s: one year, so that a deadline of now + timeout_s is a valid steady_clock time.
inline constexpr double kMaxTimeoutS = 365.0 * 24 * 3600;
// ... and at least a second: the deadline starts with the process (the start-up watchdog), and
// MPI's start-up alone takes a good part of a second; 0.01 s failed every run in MPI_Init.
inline constexpr double kMinTimeoutS = 1.0;
// runtime.threads: the OpenMP team one rank's GEMMs and kernels run on. Each member is a thread
// oneDNN, OpenBLAS and the kernels start; more than this is more than any CPU node has hardware
// threads, and a team that large fails inside the libraries rather than in the config.
inline constexpr int kMaxCpuThreads = 1024;
// bench.warmup and bench.steps: 2^40 steps.
inline constexpr std::int64_t kMaxBenchSteps = std::int64_t{1} << 40;
// bench.rounds: each round runs every row again, so more than this is days of benchmark.
inline constexpr std::int64_t kMaxBenchRounds = 1000;
// train.max_consecutive_skips: 2^53, the most micro-batches a run may take.
inline constexpr std::int64_t kMaxConsecutiveSkips = std::int64_t{1} << 53;
// plan --compute-ms: a measured compute time per step of at most about 11.6 days.
inline constexpr double kMaxComputeMs = 1e9;

}  // namespace zl
