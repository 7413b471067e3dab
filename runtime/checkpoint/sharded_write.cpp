// Writing a sharded checkpoint (see sharded_checkpoint.h): which pieces each rank holds, writing
// them as one shard (from a host copy, async; from the state itself, sync), and the commit by
// rank 0.
//
// Note [Shard pieces]: a rank writes the elements whose optimizer state (and, in bf16 or stage 3,
// whose masters) it holds, as the plan says (ModePlan::stepped_range): its shard of every bucket
// with element shards, its owned buckets with bucket owners; in ddp every rank holds everything,
// so rank r writes the r-th even slice of the flat parameters. A piece is a run of one
// parameter's elements (padding never reaches a file), named by the parameter and its first
// element, so a load into another plan - other buckets, padding, shards or world size - finds the
// elements it needs by name and offset, as the single-file loader does by name.
#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>  // crc32_combine

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "base/device_buffer.h"
#include "base/staging_copy.h"
#include "base/errors.h"
#include "runtime/checkpoint/files/checkpoint_files.h"
#include "runtime/checkpoint/checkpoint_internal.h"
#include "runtime/checkpoint/files/checkpoint_pruning.h"
#include "runtime/checkpoint/files/crc32.h"
#include "runtime/checkpoint/sharded_checkpoint.h"

namespace zl {
namespace fs = std::filesystem;

namespace {

// The elements of bucket b that `rank` writes (Note [Shard pieces]). The one place that reads the
// plan's ownership.
ElementRange held_range(const TrainingState& state, const Bucket& b, int rank, std::int64_t total) {
  if (state.mode.replicas > 1) {
    // Hybrid sharding: the replicas of a shard split it, so every rank writes 1/world of it all.
    const ElementRange shard = state.mode.stepped_range(state.plan, b, rank);
    const std::int64_t replica = rank / state.plan.world_size, copies = state.mode.replicas;
    const std::int64_t lo = shard.offset + shard.numel * replica / copies;
    const std::int64_t hi = shard.offset + shard.numel * (replica + 1) / copies;
    return ElementRange{lo, hi - lo};
  }
  if (state.mode.sharded_state) return state.mode.stepped_range(state.plan, b, rank);
  const int world = state.world.size;
  const std::int64_t lo = std::max(b.offset, total * rank / world);
  const std::int64_t hi = std::min(b.offset + b.numel, total * (rank + 1) / world);
  return hi > lo ? ElementRange{lo, hi - lo} : ElementRange{b.offset, 0};
}

// The largest generation among the shard files of `step_dir`, -1 when there are none.
std::int64_t largest_generation(const std::string& step_dir) {
  std::int64_t last = -1;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(step_dir, ec)) {
    const std::string name = entry.path().filename().string();
    const std::size_t g = name.rfind(".g");
    const std::size_t dot = name.find('.', g + 2);
    if (name.rfind("shard_", 0) != 0 || g == std::string::npos || dot == std::string::npos)
      continue;
    last = std::max(last, parse_count(name.substr(g + 2, dot - g - 2)).value_or(-1));
  }
  return last;
}

// The generation of a new checkpoint in `step_dir`: one above the manifest's there, so no file a
// manifest names is ever written again (files of other generations are what crashed writes left,
// named by no manifest: they may be replaced); 0 without a manifest; one above every shard file
// when the manifest cannot be read.
std::int64_t next_generation(const std::string& step_dir) {
  const std::string manifest = (fs::path(step_dir) / kManifestName).string();
  std::error_code ec;
  if (!fs::exists(manifest, ec)) return 0;
  try {
    return read_manifest(manifest).generation + 1;
  } catch (const UserError&) {
    return largest_generation(step_dir) + 1;
  }
}

// The source's elements in host memory, readable in place: fp32 values and optimizer state on
// the CPU. Null where they must be copied: device memory, and masters (which read_master_range
// assembles from a bf16 parameter and its remainder).
const float* host_view(const TrainingState& state, const TensorSource& s) {
  if (state.store.device() != DeviceKind::Cpu) return nullptr;
  if (s.state >= 0) return state.optimizer.state_at(s.bucket, s.state, s.flat);
  return masters_in_file(state) ? nullptr : state.store.param_data(s.param) + s.begin;
}

// Queues out[0, n) = the source's elements [from, from + n) on `copies` (masters: at once).
void copy_source(const TrainingState& state, const TensorSource& s, std::int64_t from,
                 std::int64_t n, float* out, StagingCopy& copies) {
  if (s.state >= 0) {
    copies.copy_to_host(state.optimizer.state_at(s.bucket, s.state, s.flat + from), out, n);
  } else if (masters_in_file(state)) {
    state.optimizer.read_master_range(s.bucket, ElementRange{s.flat + from, n}, out);
  } else {
    copies.copy_to_host(state.store.param_data(s.param) + s.begin + from, out, n);
  }
}

// The floats of a shard's data: its tensors' elements.
std::int64_t shard_floats(const StagedShard& shard) {
  std::int64_t floats = 0;
  for (const TensorSpec& t : shard.tensors) floats += t.shape[0];
  return floats;
}

// Writes `shard`'s file from the data `fill(write)` hands write(values, n), fsyncs it and its
// directory entry, and returns its size and CRC32. RuntimeFailure naming the rank and the file.
// Once half of the data is written, the fault point "during_write" may end the process: a shard
// cut short, as a kill in the middle of the write leaves it.
template <typename Fill>
WrittenShard write_shard_file(const StagedShard& shard, Fill&& fill) {
  try {
    {
      SafetensorsWriter writer(shard.path, shard.tensors, shard.metadata);
      const std::int64_t half = shard_floats(shard) / 2;
      std::int64_t written = 0;
      bool faulted = false;
      const auto fault_point = [&] {
        faulted = true;
        checkpoint_fault_point("during_write", shard.step);
      };
      fill([&](const float* values, std::int64_t n) {
        if (!faulted && written + n >= half) {
          const std::int64_t first = half - written;
          writer.write_floats(values, first);
          fault_point();
          values += first;
          n -= first;
          written += first;
        }
        writer.write_floats(values, n);
        written += n;
      });
      if (!faulted) fault_point();  // a shard with no data
      writer.finish();
    }
    sync_directory(fs::path(shard.path).parent_path().string());
    // The whole file's CRC32: the header's bytes (read back: the writer fills its CRCs in last)
    // combined with the data section's, which the writer computed as it wrote.
    const SafetensorsReader back(shard.path);
    const std::uint64_t header = 8 + back.header_bytes();
    std::vector<unsigned char> head(static_cast<std::size_t>(header));
    const int fd = ::open(shard.path.c_str(), O_RDONLY | O_CLOEXEC);
    const bool read_ok =
        fd >= 0 && ::pread(fd, head.data(), head.size(), 0) == static_cast<ssize_t>(head.size());
    if (fd >= 0) ::close(fd);
    if (!read_ok) throw RuntimeFailure(fmt::format("cannot read back '{}'", shard.path));
    auto crc = crc32_update(0, head.data(), head.size());
    const std::uint32_t data_crc =
        static_cast<std::uint32_t>(std::stoul(back.metadata().at(kDataCrcKey), nullptr, 16));
    crc = static_cast<std::uint32_t>(
        crc32_combine(crc, data_crc, static_cast<z_off_t>(back.data_bytes())));
    return WrittenShard{header + back.data_bytes(), crc};
  } catch (const std::exception& e) {
    throw RuntimeFailure(fmt::format("checkpoint shard '{}' of rank {} could not be written: {}",
                                     shard.path, shard.rank, e.what()));
  }
}

// A piece rank `rank` writes: elements of a parameter within the state it holds (element shards,
// owned buckets; ddp: an even slice of the flat parameters).
struct HeldPiece {
  int param = 0, bucket = 0;
  std::int64_t begin = 0, numel = 0;  // within the parameter
};

std::vector<HeldPiece> held_pieces(const TrainingState& state, int rank) {
  std::int64_t total = 0;
  for (const Bucket& b : state.plan.buckets) total = std::max(total, b.offset + b.numel);
  std::vector<HeldPiece> out;
  for (const Bucket& b : state.plan.buckets) {
    for_each_param_run(state.store, b, held_range(state, b, rank, total),
                       [&](int id, std::int64_t lo, std::int64_t hi) {
                         out.push_back({id, b.index, lo, hi - lo});
                       });
  }
  return out;
}

}  // namespace

std::int64_t staged_floats(const TrainingState& state, int rank) {
  if (state.plan.world_size > state.world.size) return 0;
  std::int64_t held = 0;
  for (const HeldPiece& h : held_pieces(state, rank)) held += h.numel;
  // Each piece is a tensor of values and one per optimizer state (describe_shard).
  return held * static_cast<std::int64_t>(1 + state.optimizer.state_names().size());
}

ShardCommit describe_shard(const TrainingState& state, const CheckpointConfig& c,
                           const CheckpointComm& comm, StagedShard& out) {
  const World& world = state.world;
  ParameterStore& store = state.store;
  if (state.plan.world_size > world.size) {
    throw UserError(
        "checkpoint.format = \"sharded\": a link.ranks timing study holds no "
        "checkpointable state (each rank steps a part of its shard only)");
  }
  ShardCommit commit;
  commit.dir = c.dir;
  commit.step_dir = (fs::path(c.dir) / sharded_dir_name(state.position.step)).string();
  commit.keep = c.keep;
  commit.protected_step = state.position.step >= state.total_steps ? -1 : state.resumed_step;
  commit.run_id = state.config.run_id;
  commit.quiet = state.quiet;

  // Rank 0 makes the directory and picks the generation before any rank creates a file in it.
  std::int64_t generation = 0;
  if (world.is_root()) {
    std::error_code ec;
    fs::create_directories(commit.step_dir, ec);
    if (ec) {
      throw RuntimeFailure(fmt::format("cannot create checkpoint directory '{}': {}",
                                       commit.step_dir, ec.message()));
    }
    generation = next_generation(commit.step_dir);
  }
  timed_bcast(&generation, 1, MPI_INT64_T, 0, comm.get(), comm.limit(),
              "broadcasting the checkpoint generation");

  const std::vector<std::string>& states = state.optimizer.state_names();
  const std::map<std::string, std::string> metadata = checkpoint_metadata(state);
  Manifest& m = commit.manifest;
  m.step = state.position.step;
  m.generation = generation;
  m.world_size = world.size;
  m.state_names = states;
  if (world.is_root()) {  // only rank 0 writes the manifest
    m.metadata = metadata;
    for (const ParameterInfo& p : store.parameters()) m.parameters.push_back({p.name, p.shape});
    for (int r = 0; r < world.size; ++r) {
      ShardEntry e;
      e.file = shard_file_name(r, world.size, generation);
      e.rank = r;
      for (const HeldPiece& h : held_pieces(state, r)) {
        e.pieces.push_back({store.info(h.param).name, h.begin, h.numel});
      }
      m.shards.push_back(std::move(e));
    }
  }

  out.path =
      (fs::path(commit.step_dir) / shard_file_name(world.rank, world.size, generation)).string();
  out.step = state.position.step;
  out.rank = world.rank;
  out.tensors.clear();
  out.metadata = {{"format", kShardFormat},
                  {"format_version", kShardedFormatVersion},
                  {"step", std::to_string(state.position.step)},
                  {"generation", std::to_string(generation)},
                  {"rank", std::to_string(world.rank)},
                  {"world_size", std::to_string(world.size)},
                  {"config_hash", metadata.at("config_hash")}};
  out.sources.clear();
  for (const HeldPiece& h : held_pieces(state, world.rank)) {
    const ParameterInfo& p = store.info(h.param);
    const std::int64_t flat = p.offset + h.begin;
    out.metadata["begin." + p.name] = std::to_string(h.begin);
    for (int which = -1; which < static_cast<int>(states.size()); ++which) {
      out.tensors.push_back({tensor_name(p.name, states, which), "F32", {h.numel}});
      out.sources.push_back({h.param, h.bucket, h.begin, flat, which});
    }
  }
  return commit;  // out.data, the staging buffer, is kept: copy_shard overwrites all of it
}

void copy_shard(const TrainingState& state, StagedShard& shard) {
  shard.data.resize(static_cast<std::size_t>(shard_floats(shard)));
  {
    // Device to host on a copy stream of its own, all queued, then waited for together.
    StagingCopy copies(state.store.device());
    float* at = shard.data.data();
    for (std::size_t i = 0; i < shard.tensors.size(); ++i) {
      copy_source(state, shard.sources[i], 0, shard.tensors[i].shape[0], at, copies);
      at += shard.tensors[i].shape[0];
    }
    copies.wait();
  }
  const float* at = shard.data.data();
  for (const TensorSpec& t : shard.tensors) {
    require_finite(at, 0, t.shape[0], t.name, state);
    at += t.shape[0];
  }
}

WrittenShard write_shard(const StagedShard& shard) {
  return write_shard_file(shard, [&](const auto& write) {
    write(shard.data.data(), static_cast<std::int64_t>(shard.data.size()));
  });
}

WrittenShard write_shard_in_place(const TrainingState& state, const StagedShard& shard) {
  // Where a source cannot be read in place, it goes through a bounded buffer: a chunk at a time.
  constexpr std::int64_t kChunk = std::int64_t{1} << 22;  // 16 MiB of floats
  std::vector<float> buffer;
  StagingCopy copies(state.store.device());
  const auto each_chunk = [&](auto&& use) {
    for (std::size_t i = 0; i < shard.tensors.size(); ++i) {
      const TensorSource& source = shard.sources[i];
      const float* in_place = host_view(state, source);
      const std::int64_t numel = shard.tensors[i].shape[0];
      for (std::int64_t from = 0; from < numel; from += kChunk) {
        const std::int64_t n = std::min(kChunk, numel - from);
        const float* values = in_place ? in_place + from : nullptr;
        if (!values) {
          buffer.resize(static_cast<std::size_t>(n));
          copy_source(state, source, from, n, buffer.data(), copies);
          copies.wait();
          values = buffer.data();
        }
        use(shard.tensors[i], from, n, values);
      }
    }
  };
  // Every value is checked before the first byte is written: a non-finite one leaves no file.
  each_chunk([&](const TensorSpec& t, std::int64_t from, std::int64_t n, const float* values) {
    require_finite(values, from, n, t.name, state);
  });
  return write_shard_file(shard, [&](const auto& write) {
    each_chunk([&](const TensorSpec&, std::int64_t, std::int64_t n, const float* values) {
      write(values, n);
    });
  });
}

std::optional<Manifest> gather_shard_records(const CheckpointComm& comm, int rank, int world,
                                             const ShardCommit& commit, const WrittenShard& mine) {
  // bytes, crc32 of every rank, in rank order.
  const std::uint64_t record[2] = {mine.bytes, mine.crc32};
  std::vector<std::uint64_t> all(static_cast<std::size_t>(2 * world));
  timed_gather(record, 2, MPI_UINT64_T, all.data(), 2, MPI_UINT64_T, 0, comm.get(), comm.limit(),
               "gathering the checkpoint shards' sizes and checksums");
  if (rank != 0) return std::nullopt;
  Manifest m = commit.manifest;
  for (int r = 0; r < world; ++r) {
    ShardEntry& shard = m.shards[static_cast<std::size_t>(r)];
    shard.bytes = all[static_cast<std::size_t>(2 * r)];
    shard.crc32 = static_cast<std::uint32_t>(all[static_cast<std::size_t>(2 * r + 1)]);
  }
  return m;
}

void publish_checkpoint(const ShardCommit& commit, const Manifest& m) {
  const auto start = std::chrono::steady_clock::now();
  // Every shard is durable (each rank fsynced its file and directory entry before the gather).
  checkpoint_fault_point("after_write", m.step);
  write_manifest(commit.step_dir, m);
  checkpoint_fault_point("after_rename", m.step);
  const std::string name = (fs::path(sharded_dir_name(m.step)) / kManifestName).string();
  write_latest_pointer(commit.dir, name);  // only now may a resume pick the new checkpoint
  if (commit.quiet) return;
  std::uint64_t total = 0;
  for (const ShardEntry& s : m.shards) total += s.bytes;
  const double publish_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // "training stopped": what the step loop waited for this checkpoint (async: the staging copy
  // and any wait for the previous checkpoint, the publication runs in the background; sync:
  // everything).
  fmt::print(
      "zerolap: checkpoint step {} -> {} ({} shard{}, {:.1f} MB; {} in {:.3f} s, "
      "committed in {:.3f} s; training stopped {:.3f} s)\n",
      m.step, commit.step_dir, m.shards.size(), m.shards.size() == 1 ? "" : "s",
      static_cast<double>(total) / 1e6,
      commit.synchronous ? "written" : "staged", commit.staged_s,
      publish_s, commit.stopped_s + (commit.synchronous ? publish_s : 0.0));
  std::fflush(stdout);
}

void prune_after_publish(const ShardCommit& commit, const Manifest& m) {
  std::set<std::string> named{kManifestName};
  for (const ShardEntry& s : m.shards) named.insert(s.file);
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(commit.step_dir, ec)) {
    if (!named.count(entry.path().filename().string())) fs::remove_all(entry.path(), ec);
  }
  prune_checkpoints(commit.dir, commit.keep, commit.protected_step, commit.run_id);
}

}  // namespace zl
