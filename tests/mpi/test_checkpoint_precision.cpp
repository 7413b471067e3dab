// Checkpoints across precisions (Note [Masters in checkpoints], runtime/checkpoint/checkpoint.cpp):
// a bf16 run's file holds its fp32 masters under the parameter names; a bf16 resume is bitwise
// (bf16 parameters, masters, optimizer state, position) in every mode with fp32 masters and with
// remainders; an fp32 checkpoint resumes into bf16 (masters = the values, parameters = their
// master_to_bf16) and a bf16 one into fp32 (parameters = the masters); resharding to another mode,
// bucket size or world size restores every master where the new plan steps it.
#include <catch2/catch.hpp>

#include <cstring>

#include <fmt/format.h>

#include "base/bf16.h"
#include "mpi_test_util.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/files/safetensors.h"

using namespace zl;
using namespace zl::test;

namespace {

constexpr int kSaveAt = 4;
constexpr int kSteps = 8;

const std::vector<std::string> kBase = {
    "data.train_samples=96", "parallel.bucket_cap_mb=0.004", "parallel.first_bucket_cap_mb=0.001",
    "optimizer.schedule=cosine", "optimizer.warmup_steps=2", "train.steps=8"};

void train_to(Trainer& trainer, std::int64_t steps) {
  while (trainer.step() < steps) trainer.train_step();
  trainer.synchronize();
}

// The parameter as fp32 values on the host, whatever the store's dtype.
std::vector<float> parameter_values(const ParameterStore& store, int id) {
  const auto n = static_cast<std::size_t>(store.info(id).numel);
  std::vector<float> out(n);
  if (store.param_dtype() == DType::F32) {
    std::memcpy(out.data(), store.param_data(id), n * sizeof(float));
  } else {
    const Bf16* p = store.param_as<Bf16>(id);
    for (std::size_t i = 0; i < n; ++i) out[i] = bf16_to_float(p[i]);
  }
  return out;
}

// The masters of every parameter this rank steps (empty elsewhere), by parameter id.
std::vector<std::vector<float>> masters_of(Trainer& trainer) {
  const ParameterStore& store = trainer.model().store();
  std::vector<std::vector<float>> out(static_cast<std::size_t>(store.count()));
  for (const Bucket& b : trainer.plan().buckets) {
    if (!trainer.mode_plan().steps_on(b, trainer.world().rank)) continue;
    for (const int id : b.param_ids) {
      auto& m = out[static_cast<std::size_t>(id)];
      m.resize(static_cast<std::size_t>(store.info(id).numel));
      trainer.optimizer().read_master(id, m.data());
    }
  }
  return out;
}

// Everything a bitwise resume must reproduce on this rank, as raw bits.
struct Snapshot {
  std::vector<float> params, masters, state;
  std::int64_t step = 0, cursor = 0, t = 0;
  bool operator==(const Snapshot& o) const {
    auto same = [](const std::vector<float>& a, const std::vector<float>& b) {
      return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
    };
    return same(params, o.params) && same(masters, o.masters) && same(state, o.state) &&
           step == o.step && cursor == o.cursor && t == o.t;
  }
};

Snapshot snapshot(Trainer& trainer) {
  trainer.synchronize();
  Snapshot s;
  const ParameterStore& store = trainer.model().store();
  for (int id = 0; id < store.count(); ++id) {
    const auto v = parameter_values(store, id);
    s.params.insert(s.params.end(), v.begin(), v.end());
  }
  for (const auto& m : masters_of(trainer)) s.masters.insert(s.masters.end(), m.begin(), m.end());
  const auto ns = static_cast<int>(trainer.optimizer().state_names().size());
  for (int id = 0; id < store.count(); ++id) {
    for (int which = 0; which < ns; ++which) {
      if (const float* p = trainer.optimizer().param_state(id, which)) {
        s.state.insert(s.state.end(), p, p + store.info(id).numel);
      }
    }
  }
  s.step = trainer.step();
  s.cursor = trainer.batch_cursor();
  s.t = trainer.optimizer().step_count();
  return s;
}

// The file's fp32 tensor of parameter `id`.
std::vector<float> file_values(const std::string& path, const ParameterStore& store, int id) {
  const SafetensorsReader file(path);
  std::vector<float> out(static_cast<std::size_t>(store.info(id).numel));
  file.read_f32(store.info(id).name, store.info(id).shape, out.data());
  return out;
}

bool bitwise(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// After a load of `path` into `trainer`: every parameter is the file's value (fp32) or its
// master_to_bf16 (bf16), and every master this rank steps is the file's value, bitwise.
void check_loaded_from(Trainer& trainer, const std::string& path) {
  const ParameterStore& store = trainer.model().store();
  const auto masters = masters_of(trainer);
  for (int id = 0; id < store.count(); ++id) {
    INFO(store.info(id).name);
    const auto values = file_values(path, store, id);
    auto expected = values;
    if (store.param_dtype() == DType::BF16) {
      for (float& x : expected) x = bf16_to_float(master_to_bf16(x));
    }
    CHECK(bitwise(parameter_values(store, id), expected));
    const auto& m = masters[static_cast<std::size_t>(id)];
    if (!m.empty()) CHECK(bitwise(m, values));
  }
}

}  // namespace

TEST_CASE("a bf16 resume is bitwise: parameters, masters, optimizer state", "[checkpoint-precision]") {
  const World world = world_of(MPI_COMM_WORLD);
  const std::string dir = zl::test::shared_dir(world.comm, "ckpt-precision-bf16-resume");
  const std::vector<std::vector<std::string>> modes = {
      {"parallel.mode=ddp"},
      {"parallel.mode=zero", "parallel.overlap=none"},
      {"parallel.mode=zero", "parallel.overlap=interleaved", "parallel.collective=reduce_broadcast"},
  };
  int index = 0;
  for (const char* master : {"fp32", "remainders"}) {
    for (const auto& mode : modes) {
      const auto overrides = with(with(kBase, mode), {"precision.compute=bf16",
                                                      fmt::format("precision.master_weights={}", master)});
      INFO(fmt::format("world {}: {}", world.size, fmt::join(overrides, " ")));
      const Config config = small_config(overrides);
      const std::string path = fmt::format("{}/case{}.safetensors", dir, index++);
      Trainer first(config, world, quiet_options());
      train_to(first, kSaveAt);
      const Snapshot saved = snapshot(first);
      write_checkpoint(first.state(), path);
      // The file: fp32 masters under the parameter names, the run's precision in the metadata.
      const SafetensorsReader file(path);
      CHECK(file.metadata().at("precision") == "bf16");
      CHECK(file.metadata().at("master_weights") == master);
      for (const TensorEntry& t : file.tensors()) CHECK(t.dtype == "F32");
      check_loaded_from(first, path);  // the masters first holds are the file's values
      train_to(first, kSteps);
      const Snapshot uninterrupted = snapshot(first);

      Trainer resumed(config, world, quiet_options());
      load_checkpoint(resumed.state(), path);
      CHECK(snapshot(resumed) == saved);
      train_to(resumed, kSteps);
      CHECK(snapshot(resumed) == uninterrupted);
    }
  }
}

TEST_CASE("fp32 checkpoints resume into bf16 and bf16 checkpoints into fp32",
          "[checkpoint-precision]") {
  const World world = world_of(MPI_COMM_WORLD);
  const std::string dir = zl::test::shared_dir(world.comm, "ckpt-precision-cross");
  const auto zero = with(kBase, {"parallel.mode=zero", "parallel.overlap=after_backward"});
  const std::string from_fp32 = dir + "/fp32.safetensors", from_bf16 = dir + "/bf16.safetensors";
  {
    Trainer fp32(small_config(zero), world, quiet_options());
    train_to(fp32, kSaveAt);
    write_checkpoint(fp32.state(), from_fp32);
    Trainer bf16(small_config(with(zero, {"precision.compute=bf16"})), world, quiet_options());
    train_to(bf16, kSaveAt);
    write_checkpoint(bf16.state(), from_bf16);
  }
  for (const char* master : {"fp32", "remainders"}) {
    INFO("fp32 -> bf16 with master_weights = " << master);
    const auto bf16 = with(zero, {"precision.compute=bf16",
                                  fmt::format("precision.master_weights={}", master)});
    Trainer resumed(small_config(bf16), world, quiet_options());
    load_checkpoint(resumed.state(), from_fp32);
    check_loaded_from(resumed, from_fp32);
    train_to(resumed, kSaveAt + 2);
    CHECK(identical_on_all_ranks(snapshot(resumed).params, world.comm));
  }
  {
    INFO("bf16 -> fp32: the parameters are the masters");
    Trainer resumed(small_config(zero), world, quiet_options());
    load_checkpoint(resumed.state(), from_bf16);
    check_loaded_from(resumed, from_bf16);
    train_to(resumed, kSaveAt + 2);
    CHECK(identical_on_all_ranks(snapshot(resumed).params, world.comm));
  }
}

TEST_CASE("a bf16 checkpoint reshards to another mode, bucket size and world size",
          "[checkpoint-precision]") {
  const World world = world_of(MPI_COMM_WORLD);
  const std::string dir = zl::test::shared_dir(world.comm, "ckpt-precision-bf16-reshard");
  const std::string path = dir + "/ddp.safetensors";
  const auto bf16 = with(kBase, {"precision.compute=bf16"});
  {
    Trainer writer(small_config(with(bf16, {"parallel.mode=ddp", "parallel.bucket_cap_mb=25"})),
                   world, quiet_options());
    train_to(writer, kSaveAt);
    write_checkpoint(writer.state(), path);
  }
  // Every rank's new shard of masters and state, from the file by name.
  Trainer zero(small_config(with(bf16, {"parallel.mode=zero", "parallel.overlap=interleaved",
                                        "parallel.bucket_cap_mb=0.001",
                                        "parallel.first_bucket_cap_mb=0.0001"})),
               world, quiet_options());
  load_checkpoint(zero.state(), path);
  check_loaded_from(zero, path);
  train_to(zero, kSaveAt + 2);
  CHECK(identical_on_all_ranks(snapshot(zero).params, world.comm));
  // Rank 0 alone gathers every bucket's masters.
  MPI_Comm one = MPI_COMM_NULL;
  MPI_Comm_split(world.comm, world.rank == 0 ? 0 : MPI_UNDEFINED, 0, &one);
  if (one != MPI_COMM_NULL) {
    Trainer alone(small_config(with(bf16, {"parallel.mode=zero"})), world_of(one),
                  quiet_options());
    load_checkpoint(alone.state(), path);
    check_loaded_from(alone, path);
    MPI_Comm_free(&one);
  }
  MPI_Barrier(world.comm);
}
