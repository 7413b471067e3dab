// Sharded checkpoints (runtime/checkpoint/sharded_checkpoint.h) on 4 ranks: a stage-3 run's
// sharded checkpoint loads at 3 ranks stage 1, 2 ranks with bucket owners and 1 rank ddp into
// bitwise the parameters, state and position the single-file checkpoint of the same step gives;
// the async writer's files are byte for byte the sync writer's; `consolidate` gives the
// single-file checkpoint's tensors byte for byte; a corrupt, truncated or missing shard fails
// the load on every rank (exit 2 in the command-line test, sharded_checkpoint_test.sh).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>

#include <fmt/format.h>

#include "mpi_test_util.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/checkpoint_saver.h"
#include "runtime/checkpoint/files/consolidate.h"
#include "runtime/checkpoint/files/safetensors.h"
#include "runtime/checkpoint/files/shard_manifest.h"

using namespace zl;
using namespace zl::test;
namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kBase = {"parallel.bucket_cap_mb=0.004",
                                        "parallel.first_bucket_cap_mb=0.001",
                                        "data.train_samples=96", "train.steps=8"};

std::vector<std::string> stage(int s, const char* overlap) {
  return {"parallel.mode=zero", std::string("parallel.overlap=") + overlap,
          "parallel.collective=reduce_scatter_allgather", fmt::format("parallel.zero_stage={}", s)};
}

// What a load restores: named parameters (no padding), this rank's state of the elements it
// steps (padding included), the position.
struct Restored {
  std::vector<float> params, state;
  std::int64_t step = 0, cursor = 0, t = 0;
};

Restored restored(Trainer& trainer) {
  Restored r;
  const std::vector<float> flat = parameters_of(trainer);
  const ParameterStore& store = trainer.model().store();
  for (const ParameterInfo& p : store.parameters()) {
    r.params.insert(r.params.end(), flat.begin() + p.offset, flat.begin() + p.offset + p.numel);
  }
  RankOptimizer& opt = trainer.optimizer();
  const TrainingState state = trainer.state();
  for (const Bucket& b : trainer.plan().buckets) {
    const ElementRange& range = opt.stepped(b.index);
    if (range.numel == 0 || !state.mode.steps_on(b, trainer.world().rank)) continue;
    for (int s = 0; s < static_cast<int>(opt.state_names().size()); ++s) {
      const float* p = opt.state_at(b.index, s, range.offset);
      r.state.insert(r.state.end(), p, p + range.numel);
    }
  }
  r.step = trainer.step();
  r.cursor = trainer.batch_cursor();
  r.t = opt.step_count();
  return r;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE(
    "a 4-rank stage-3 sharded checkpoint loads as the single-file one does, bitwise; async "
    "writes the same bytes at stages 3 and 1; consolidate gives the single file's tensors",
    "[sharded-checkpoint]") {
  const World world = world_of(MPI_COMM_WORLD);
  REQUIRE(world.size == 4);
  const std::string dir = shared_dir(world.comm, "sharded_checkpoint");
  // Stage 3 writes masters (read through a host buffer), stage 1 fp32 values (read in place by
  // the sync writer): both as the async writer's copy does, and as the single file holds them.
  for (const auto& [name, writer_stage] : {std::pair{"stage3", stage(3, "interleaved")},
                                           std::pair{"stage1", stage(1, "none")}}) {
    INFO("written at " << name);
    const std::string single = dir + "/" + name + ".safetensors";
    const std::string sync_dir = dir + "/" + name + "_sync";
    const std::string async_dir = dir + "/" + name + "_async";
    {
      Config sync_config =
          small_config(with(with(kBase, writer_stage),
                            {fmt::format("checkpoint.dir=\"{}\"", sync_dir),
                             "checkpoint.format=sharded"}));
      Config async_config = sync_config;
      async_config.checkpoint.dir = async_dir;
      async_config.checkpoint.async = true;
      Trainer trainer(sync_config, world, quiet_options());
      train_checking_identity(trainer, 4);
      write_checkpoint(trainer.state(), single);
      CheckpointSaver sync(sync_config, world);
      sync.save(trainer.state());
      CheckpointSaver async(async_config, world);
      async.save(trainer.state());
      async.poll();  // may or may not commit: every rank decides alike
      async.finish();
    }
    if (!world.is_root()) continue;
    // `latest` names the manifest; async and sync wrote the same shards, byte for byte.
    const std::string manifest = sync_dir + "/step_00000004/manifest.json";
    CHECK(file_bytes(sync_dir + "/latest") == "step_00000004/manifest.json\n");
    CHECK(file_bytes(async_dir + "/latest") == "step_00000004/manifest.json\n");
    const Manifest m = read_manifest(manifest);
    REQUIRE(m.shards.size() == 4);
    for (const ShardEntry& s : m.shards) {
      CHECK_FALSE(s.pieces.empty());
      const std::string a = file_bytes(sync_dir + "/step_00000004/" + s.file);
      CHECK(a.size() == s.bytes);
      CHECK(a == file_bytes(async_dir + "/step_00000004/" + s.file));
    }
    CHECK(file_bytes(manifest) == file_bytes(async_dir + "/step_00000004/manifest.json"));
    // consolidate: the single file's tensors, names, shapes and bytes.
    const std::string out = dir + "/" + name + "_consolidated.safetensors";
    consolidate_checkpoint(sync_dir + "/step_00000004", out, ConsolidateState::Include);
    const SafetensorsReader want(single), got(out);
    CHECK_NOTHROW(got.verify_checksums());
    REQUIRE(got.tensors().size() == want.tensors().size());
    for (const TensorEntry& t : want.tensors()) {
      const TensorEntry* g = got.find(t.name);
      REQUIRE(g != nullptr);
      CHECK(g->shape == t.shape);
      std::string a(t.end - t.begin, '\0'), b(g->end - g->begin, '\0');
      want.read_data(t.begin, a.data(), a.size());
      got.read_data(g->begin, b.data(), b.size());
      CHECK(a == b);
    }
  }
  {
    // A non-finite value is never written, sync (read in place) or async (copied): every rank's
    // pieces hold one, so every rank refuses before any file of the checkpoint exists.
    const std::string bad_dir = dir + "/nonfinite";
    Config config = small_config(with(with(kBase, stage(1, "none")),
                                      {fmt::format("checkpoint.dir=\"{}\"", bad_dir),
                                       "checkpoint.format=sharded"}));
    Trainer trainer(config, world, quiet_options());
    ParameterStore& store = trainer.model().store();
    for (int id = 0; id < static_cast<int>(store.parameters().size()); ++id) {
      std::fill_n(store.param_data(id), store.info(id).numel,
                  std::numeric_limits<float>::quiet_NaN());
    }
    for (const bool async : {false, true}) {
      INFO("async = " << async);
      config.checkpoint.async = async;
      CheckpointSaver saver(config, world);
      CHECK_THROWS_WITH(saver.save(trainer.state()),
                        Catch::Contains("checkpoint of step 0 not written") &&
                            Catch::Contains("non-finite value (nan at element 0)"));
      MPI_Barrier(world.comm);
      std::size_t shards = 0;
      for (const auto& entry : fs::directory_iterator(bad_dir + "/step_00000000")) {
        shards += entry.path().filename().string().rfind("shard_", 0) == 0;
      }
      CHECK(shards == 0);
    }
  }
  const std::string single = dir + "/stage3.safetensors", sync_dir = dir + "/stage3_sync";
  const std::string manifest = sync_dir + "/step_00000004/manifest.json";
  MPI_Barrier(world.comm);

  // 3 ranks stage 1, 2 ranks bucket owners, 1 rank ddp: the sharded and the single-file load give
  // the same bits, and so do two more steps.
  const std::vector<std::pair<int, std::vector<std::string>>> targets{
      {3, stage(1, "none")},
      {2, {"parallel.mode=zero", "parallel.collective=reduce_broadcast"}},
      {1, {"parallel.mode=ddp"}}};
  for (const auto& [ranks, keys] : targets) {
    MPI_Comm sub = MPI_COMM_NULL;
    MPI_Comm_split(world.comm, world.rank < ranks ? 0 : MPI_UNDEFINED, world.rank, &sub);
    if (sub != MPI_COMM_NULL) {
      INFO(ranks << " ranks: " << describe(keys));
      const World w = world_of(sub);
      const Config config = small_config(with(kBase, keys));
      Trainer from_single(config, w, quiet_options());
      load_checkpoint(from_single.state(), single);
      Trainer from_shards(config, w, quiet_options());
      load_checkpoint(from_shards.state(), w.is_root() ? sync_dir + "/step_00000004" : "");
      const Restored a = restored(from_single), b = restored(from_shards);
      CHECK(a.step == 4);
      CHECK(b.step == a.step);
      CHECK(b.cursor == a.cursor);
      CHECK(b.t == a.t);
      CHECK(same_bits(a.params, b.params));
      CHECK(same_bits(a.state, b.state));
      if (w.rank == 0) CHECK_FALSE(a.state.empty());  // rank 0 steps a bucket in every target
      CHECK(same_bits(train_checking_identity(from_single, 2),
                      train_checking_identity(from_shards, 2)));
      MPI_Comm_free(&sub);
    }
    MPI_Barrier(world.comm);
  }

  // A damaged shard fails the load on every rank, whichever rank checks it.
  const Config config = small_config(with(kBase, stage(1, "none")));
  const std::string shard1 = sync_dir + "/step_00000004/" + shard_file_name(1, 4, 0);
  const std::string saved = world.is_root() ? file_bytes(shard1) : std::string();
  const auto damage = [&](const std::function<void()>& edit) {
    if (world.is_root()) edit();
    MPI_Barrier(world.comm);
    Trainer t(config, world, quiet_options());
    CHECK_THROWS_AS(load_checkpoint(t.state(), world.is_root() ? manifest : ""), ReportedUserError);
    if (world.is_root()) std::ofstream(shard1, std::ios::binary) << saved;  // restored
    MPI_Barrier(world.comm);
  };
  damage([&] {  // one flipped byte in the data
    std::string bytes = saved;
    bytes[bytes.size() - 5] ^= 0x10;
    std::ofstream(shard1, std::ios::binary) << bytes;
  });
  damage([&] { std::ofstream(shard1, std::ios::binary) << saved.substr(0, saved.size() / 2); });
  damage([&] { fs::remove(shard1); });
  damage([&] {  // another step's shard under this name: same size, another CRC
    std::string bytes = saved;
    const std::size_t at = bytes.find("\"step\":\"4\"");
    CHECK(at != std::string::npos);  // not REQUIRE: the other ranks wait in the load
    if (at != std::string::npos) bytes[at + 8] = '5';
    std::ofstream(shard1, std::ios::binary) << bytes;
  });
}
