// Helpers for the MPI tests: small in-process training runs built from TOML text, parameter
// snapshots, and cross-rank comparisons. Every helper is collective over the world it is given.
#pragma once

#include <mpi.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "base/bf16.h"
#include "runtime/config/config.h"
#include "runtime/config/mode.h"
#include "runtime/train/plan/memory_estimate.h"
#include "runtime/train/run/trainer.h"
#include "runtime/comm/world.h"

namespace zl::test {

// A fresh, empty directory ZEROLAP_TEST_TMP/<name>-<rank 0's pid> with the same path on every rank
// of `comm` (rank 0 makes it; the others wait for it).
inline std::string shared_dir(MPI_Comm comm, const std::string& name) {
  int pid = static_cast<int>(::getpid());
  MPI_Bcast(&pid, 1, MPI_INT, 0, comm);
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  const std::filesystem::path dir =
      std::filesystem::path(ZEROLAP_TEST_TMP) / (name + "-" + std::to_string(pid));
  if (rank == 0) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
  }
  MPI_Barrier(comm);
  return dir.string();
}

// A file's bytes ("" when it cannot be read).
inline std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A tiny classification problem: a random teacher MLP's argmax labels, a 4-layer student.
inline const char* kSmallConfig = R"(
[model]
kind = "mlp"
widths = [8, 32, 32, 4]
activation = "gelu"
seed = 3
[data]
kind = "teacher"
teacher_task = "classification"
teacher_hidden = 16
train_samples = 2048
test_samples = 256
batch_size = 8
seed = 5
[optimizer]
kind = "adam"
lr = 0.01
[train]
steps = 20
log_every = 1000
[runtime]
timeout_s = 60
# These tests read parameters through host pointers; the CUDA path is tests/mpi/test_cuda_train.cpp.
device = "cpu"
)";

// The trainer's allocations against the up-front memory estimate, buffer by buffer.
inline void check_allocations_equal(const RankMemory& got, const RankMemory& want) {
  CHECK(got.parameters == want.parameters);
  CHECK(got.gradients == want.gradients);
  CHECK(got.master == want.master);
  CHECK(got.state == want.state);
}

// The overrides a, then b: a test's base overrides with one case's keys appended.
inline std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The overrides as one line, for a failing case's INFO.
inline std::string describe(const std::vector<std::string>& overrides) {
  std::string line;
  for (const auto& o : overrides) line += (line.empty() ? "" : " ") + o;
  return line;
}

inline Config small_config(const std::vector<std::string>& overrides) {
  return parse_config(kSmallConfig, "small.toml", overrides);
}

inline World world_of(MPI_Comm comm) { return describe_world(comm); }

// The overrides that select `mode` (runtime/config/mode.h).
inline std::vector<std::string> overrides_of(const Mode& mode) {
  ParallelConfig p;
  set_mode(p, mode);
  return {"parallel.mode=" + std::string(to_string(p.mode)),
          "parallel.overlap=" + std::string(to_string(p.overlap)),
          "parallel.collective=" + std::string(to_string(p.collective)),
          "parallel.zero_stage=" + std::to_string(p.zero_stage),
          "parallel.shard_group=" + std::to_string(p.shard_group)};
}

// The modes of all_modes() that `keep` accepts, as their overrides, in all_modes()'s order: what
// a test enumerates instead of a list of mode names by hand.
template <class Keep>
std::vector<std::vector<std::string>> mode_overrides(Keep keep) {
  std::vector<std::vector<std::string>> out;
  for (const Mode& m : all_modes()) {
    if (keep(m)) out.push_back(overrides_of(m));
  }
  return out;
}

// ddp and the modes with a rank per bucket (the stage-1 bucket collectives).
inline bool ddp_or_bucket_owned(const Mode& m) {
  return m.ddp() || m.ownership() == Ownership::Bucket;
}

inline TrainerOptions quiet_options() {
  TrainerOptions o;
  o.quiet = true;
  o.write_outputs = false;
  return o;
}

// The flat parameters as fp32 (a bf16 store's values widened: exact, so bitwise comparisons of
// the result compare the bf16 bits).
inline std::vector<float> parameters_of(Trainer& trainer) {
  trainer.synchronize();
  // ZeRO stage 3 keeps shards only: gathered (collective, every rank calls this).
  if (ParameterGather* gather = trainer.parameter_gather()) return gather->full_parameters();
  const auto& store = trainer.model().store();
  if (store.param_dtype() == DType::BF16) {
    const Bf16* p = store.params_as<Bf16>();
    std::vector<float> out(static_cast<std::size_t>(store.total_numel()));
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = bf16_to_float(p[i]);
    return out;
  }
  return std::vector<float>(store.data(), store.data() + store.total_numel());
}

inline std::uint64_t fnv1a(const std::vector<float>& v) {
  std::uint64_t h = 1469598103934665603ull;
  const auto* bytes = reinterpret_cast<const unsigned char*>(v.data());
  for (std::size_t i = 0; i < v.size() * sizeof(float); ++i) {
    h = (h ^ bytes[i]) * 1099511628211ull;
  }
  return h;
}

// True on every rank iff every rank holds bitwise the same vector.
inline bool identical_on_all_ranks(const std::vector<float>& v, MPI_Comm comm) {
  const std::uint64_t mine = fnv1a(v);
  std::uint64_t lo = 0, hi = 0;
  MPI_Allreduce(&mine, &lo, 1, MPI_UINT64_T, MPI_MIN, comm);
  MPI_Allreduce(&mine, &hi, 1, MPI_UINT64_T, MPI_MAX, comm);
  return lo == hi;
}

// Largest violation of |a - b| <= atol + rtol * |b| (<= 1 means within tolerance).
inline double tolerance_ratio(const std::vector<float>& a, const std::vector<float>& b,
                              double rtol, double atol) {
  REQUIRE(a.size() == b.size());
  double worst = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double allowed = atol + rtol * std::fabs(static_cast<double>(b[i]));
    worst = std::max(worst, std::fabs(static_cast<double>(a[i]) - b[i]) / allowed);
  }
  return worst;
}

// The worst violation of invariant 3's tolerance of a run against ddp's: rtol 1e-5, atol 1e-6 in
// fp32; in bf16 4 ulps (rtol 2^-6) plus 2e-3, twice that where each micro-batch's sum is rounded
// to a bf16 wire (tests/mpi/test_element_shards.cpp says why). At most 1 is within it.
inline double worst_against_ddp(const std::vector<float>& got, const std::vector<float>& ddp,
                                bool bf16, bool rounded_per_micro_batch) {
  const double widen = rounded_per_micro_batch ? 2.0 : 1.0;
  return bf16 ? tolerance_ratio(got, ddp, widen / 64.0, widen * 2e-3)
              : tolerance_ratio(got, ddp, 1e-5, 1e-6);
}

// Bitwise equality; memcmp must not see the null data() of an empty vector (a parameter this rank
// does not step).
inline bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// Every parameter's values as fp32, in registration order, without padding: comparable across
// layouts (element shards pad every bucket, the bucket modes do not).
inline std::vector<float> named_parameters(Trainer& trainer) {
  const std::vector<float> flat = parameters_of(trainer);
  std::vector<float> out;
  for (const ParameterInfo& p : trainer.model().store().parameters()) {
    out.insert(out.end(), flat.begin() + p.offset, flat.begin() + p.offset + p.numel);
  }
  return out;
}

// The precisions the element-shard tests run each mode in: fp32, bf16 with fp32 masters, and
// bf16 with remainders on a bf16 wire.
struct Precision {
  const char* name;
  std::vector<std::string> keys;
  bool bf16;
  bool bf16_wire;
};
inline const Precision kPrecisions[] = {
    {"fp32", {}, false, false},
    {"bf16 + fp32 master", {"precision.compute=bf16"}, true, false},
    {"bf16 + remainders, bf16 wire",
     {"precision.compute=bf16", "precision.master_weights=remainders",
      "precision.reduce_dtype=bf16"},
     true, true},
};

// Trains `steps` steps; checks after every step that all ranks hold identical parameters.
inline std::vector<float> train_checking_identity(Trainer& trainer, std::int64_t steps) {
  for (std::int64_t s = 0; s < steps; ++s) {
    trainer.train_step();
    const auto p = parameters_of(trainer);
    const bool same = identical_on_all_ranks(p, trainer.world().comm);
    if (!same) FAIL_CHECK("ranks diverged after step " << s + 1);
    if (!same) break;
  }
  return parameters_of(trainer);
}

}  // namespace zl::test
