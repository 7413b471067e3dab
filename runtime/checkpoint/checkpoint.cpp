// Saving and loading a training state (see checkpoint.h): the collective half. Messages go on a
// private duplicate of the world communicator, on a quiescent state (Trainer::state() waits for
// in-flight work), so no collective of the trainer's own communicators is in flight and no message
// can match another protocol's.
//
// Note [One bucket at a time]: optimizer state moves between rank 0 and the ranks holding it one
// bucket at a time, in bucket order: rank 0 stages one bucket of state (all its state tensors),
// writes it to the file or sends it to its holder, and reuses the buffer for the next. So no rank
// ever holds more than one bucket of another rank's state, and a resharded load is the same loop
// over the *new* plan, reading each parameter's state from the file by name.
//
// Element shards: Note [Shards in checkpoints] below.
//
// Note [Masters in checkpoints]: a parameter's tensor holds its fp32 weight in every precision. In
// fp32 that is the parameter itself (replicated: rank 0 writes its own). In bf16 it is the master
// the ranks that step the bucket keep (the fp32 copy, or the bf16 parameter joined with its
// remainder: bitwise the fp32 master either way), gathered with the bucket's state, one bucket at
// a time. So PyTorch loads every checkpoint as fp32 weights, and a load into any precision reads
// the same tensors: fp32 parameters = the values; bf16 parameters = master_to_bf16(values), as the
// fused step writes them (base/bf16.h), and masters = the values on the ranks that step them.
// Hence a bf16 resume is bitwise (parameters, masters, state), and fp32 <-> bf16 resumes work.
#include "runtime/checkpoint/checkpoint.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>

#include <fmt/format.h>

#include "base/bf16.h"
#include "base/checked_write.h"
#include "base/device_buffer.h"
#include "base/errors.h"
#include "base/fault_stop.h"
#include "runtime/comm/timed_mpi.h"
#include "runtime/checkpoint/files/checkpoint_files.h"
#include "runtime/checkpoint/checkpoint_comm.h"
#include "runtime/checkpoint/checkpoint_internal.h"
#include "runtime/checkpoint/files/checkpoint_pruning.h"
#include "runtime/checkpoint/files/safetensors.h"
#include "runtime/checkpoint/files/shard_manifest.h"
#include "runtime/checkpoint/sharded_checkpoint.h"
#include "base/tracer.h"

namespace zl {
namespace fs = std::filesystem;

namespace {

constexpr int kEveryRank = -1;
constexpr std::int64_t kMaxMessageFloats = std::int64_t{1} << 28;  // MPI counts are ints

WaitLimit wait_limit(const TrainingState& state) {
  return WaitLimit{state.world.rank, state.config.runtime.timeout_s};
}

void send_floats(const float* data, std::int64_t n, int dest, const CheckpointComm& comm) {
  for (std::int64_t at = 0; at < n; at += kMaxMessageFloats) {
    const int count = static_cast<int>(std::min(kMaxMessageFloats, n - at));
    timed_send(data + at, count, MPI_FLOAT, dest, 0, comm.get(), comm.limit(),
               fmt::format("sending checkpoint data to rank {}", dest));
  }
}

void recv_floats(float* data, std::int64_t n, int source, const CheckpointComm& comm) {
  for (std::int64_t at = 0; at < n; at += kMaxMessageFloats) {
    const int count = static_cast<int>(std::min(kMaxMessageFloats, n - at));
    timed_recv(data + at, count, MPI_FLOAT, source, 0, comm.get(), comm.limit(),
               fmt::format("receiving checkpoint data from rank {}", source));
  }
}

void bcast_floats(float* data, std::int64_t n, const CheckpointComm& comm) {
  for (std::int64_t at = 0; at < n; at += kMaxMessageFloats) {
    const int count = static_cast<int>(std::min(kMaxMessageFloats, n - at));
    timed_bcast(data + at, count, MPI_FLOAT, 0, comm.get(), comm.limit(),
                "broadcasting checkpoint parameters");
  }
}

// The rank holding bucket b's optimizer state: the assigned rank in zero's bucket modes, else
// kEveryRank: every rank holds what it steps of it (ddp: all of it; element shards: its shard).
int state_holder(const TrainingState& state, const Bucket& b) {
  const bool owned = state.mode.sharded_state && !state.mode.element_shards;
  return owned ? b.assigned_rank : kEveryRank;
}

// Slices per bucket in the gathered staging: the masters (masters_in_file), then the state tensors.
std::int64_t gathered_slices(const TrainingState& state) {
  return (masters_in_file(state) ? 1 : 0) +
         static_cast<std::int64_t>(state.optimizer.state_names().size());
}

// The masters (masters_in_file) and state of the elements of bucket b this rank steps (stepped(b):
// the whole bucket, or its shard) -> `out`, laid out [slice][stepped(b).numel]: the fp32 masters
// first, then each state tensor. (state_from_host, the way back, reads a whole bucket's staging:
// a load stages every bucket whole.)
void stepped_to_host(const TrainingState& state, const Bucket& b, std::vector<float>& out) {
  RankOptimizer& opt = state.optimizer;
  const ElementRange& mine = opt.stepped(b.index);
  const bool masters = masters_in_file(state);
  out.assign(static_cast<std::size_t>(gathered_slices(state) * mine.numel), 0.0f);
  if (masters) {
    ZL_CHECK(opt.has_masters() || state.store.param_dtype() == DType::F32,
             "bucket {}: a bf16 run's stepping rank without masters", b.index);
    opt.read_master_range(b.index, mine, out.data());
  }
  const auto ns = static_cast<int>(opt.state_names().size());
  for (int s = 0; s < ns; ++s) {
    copy_to_host(opt.state_at(b.index, s, mine.offset), state.store.device(),
                 out.data() + ((masters ? 1 : 0) + s) * mine.numel, mine.numel);
  }
}

// Note [Shards in checkpoints]: with element shards rank r holds shard r of every bucket's masters
// and state (with hybrid sharding, shard r of its group's G: the first group, ranks 0 .. G-1,
// holds every shard once, and its replicas hold the same bits). A save gathers them to rank 0 one
// bucket at a time, rank by rank of the first group and slice by slice, each rank's shard landing
// at its place in the bucket (rank order is element order), so
// rank 0 holds the same [slice][b.numel] staging as for a bucket it owned and writes full tensors
// by parameter name; a load broadcasts each bucket's staging, and every rank keeps its shard. The
// padding in a shard is zero both ways and never reaches the file.
void gather_shards(const TrainingState& state, const Bucket& b, std::int64_t slices,
                   std::vector<float>& host, const CheckpointComm& comm) {
  const ElementRange& shard = state.optimizer.stepped(b.index);
  const int shard_ranks = state.plan.world_size;  // the first shard group
  ZL_CHECK(shard.numel * shard_ranks == b.numel, "bucket {}: shard of {} elements on {} ranks",
           b.index, shard.numel, shard_ranks);
  if (state.world.rank >= shard_ranks) return;  // a replica: the first group sends these bits
  std::vector<float> mine;
  stepped_to_host(state, b, mine);
  // Rank by rank, slice by slice, straight into place, in messages MPI's int counts can hold (a
  // shard may have more elements); MPI keeps one sender's messages in order.
  if (!state.world.is_root()) {
    for (std::int64_t s = 0; s < slices; ++s) {
      send_floats(mine.data() + s * shard.numel, shard.numel, 0, comm);
    }
    return;
  }
  host.assign(static_cast<std::size_t>(slices * b.numel), 0.0f);
  for (int r = 0; r < shard_ranks; ++r) {
    for (std::int64_t s = 0; s < slices; ++s) {
      float* place = host.data() + s * b.numel + r * shard.numel;
      if (r == 0) {
        std::copy_n(mine.data() + s * shard.numel, shard.numel, place);
      } else {
        recv_floats(place, shard.numel, r, comm);
      }
    }
  }
}

// Element of parameter `id` within its bucket's slice.
std::int64_t within(const ParameterStore& store, const Bucket& b, int id) {
  return store.info(id).offset - b.offset;
}

// Note [A shared checkpoint.dir]: in the sharded format every rank writes its shard into
// checkpoint.dir and a resume reads every shard, so the directory must be one that every rank
// sees (across nodes: a shared filesystem, at whatever path). Found at start-up, not at the first
// checkpoint after hours of training: rank 0 leaves a file there under a name of this launch,
// every other rank reads it back and writes (and removes) a file of its own there.
void require_shared_checkpoint_dir(const TrainingState& state) {
  const World& world = state.world;
  const std::string& dir = state.config.checkpoint.dir;
  std::uint64_t token = 0;
  if (world.is_root()) {
    std::random_device random;
    token = (std::uint64_t{random()} << 32) | random();
  }
  timed_bcast(&token, 1, MPI_UINT64_T, 0, world.comm, wait_limit(state),
              "broadcasting the shared checkpoint.dir check's file name");
  const std::string text = fmt::format("{:016x}", token);
  const fs::path probe = fs::path(dir) / (kSharedDirCheckPrefix + text);
  // The agreement orders the write before every read.
  agree_on_user_errors(world, [&] {
    if (world.is_root()) write_whole_file(probe.string(), text, "shared checkpoint.dir check");
  }, state.config.runtime.timeout_s);
  struct RemoveProbe {  // rank 0's file goes however the check ends
    const fs::path& path;
    bool owner;
    ~RemoveProbe() {
      std::error_code ec;
      if (owner) fs::remove(path, ec);
    }
  } remove_probe{probe, world.is_root()};
  constexpr const char* kWayOut = "or set checkpoint.format = \"single_file\" (rank 0 writes the "
                                  "whole checkpoint)";
  agree_on_user_errors(world, [&] {
    if (world.is_root()) return;
    std::ifstream in(probe);
    std::string seen;
    if (!std::getline(in, seen) || seen != text) {
      throw UserError(fmt::format(
          "checkpoint.format = \"sharded\" needs a checkpoint.dir that every rank shares (each "
          "rank writes its shard there and a resume reads them all), but this rank does not find "
          "in its checkpoint.dir '{}' the file rank 0 wrote into its own. Give every rank the "
          "same directory (a shared filesystem across nodes), {}",
          dir, kWayOut));
    }
    const std::string own = fmt::format("{}.r{}", probe.string(), world.rank);
    try {
      write_whole_file(own, text, "shared checkpoint.dir check");
    } catch (const RuntimeFailure& e) {
      throw UserError(fmt::format(
          "checkpoint.format = \"sharded\": every rank writes its shard into checkpoint.dir "
          "'{}', but this rank cannot write there ({}). Make it writable on every node, {}",
          dir, e.what(), kWayOut));
    }
    std::error_code ec;
    fs::remove(own, ec);
  }, state.config.runtime.timeout_s);
}

void create_checkpoint_dir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    throw UserError(fmt::format("cannot create checkpoint.dir '{}': {} (set checkpoint.dir to a "
                                "writable directory)",
                                dir, ec.message()));
  }
}

}  // namespace

bool masters_in_file(const TrainingState& state) {
  return state.mode.param_dtype == DType::BF16 || state.mode.gathers_parameters();
}

void parameters_from_host(const TrainingState& state, const Bucket& b,
                          const std::vector<float>& host) {
  ParameterStore& store = state.store;
  RankOptimizer& opt = state.optimizer;
  // This rank's shard of the masters, padding (zero) included.
  const auto write_master_shard = [&] {
    const ElementRange& shard = opt.stepped(b.index);
    opt.write_master_range(b.index, shard, host.data() + (shard.offset - b.offset));
  };
  // Stage 3: only this rank's shard of the parameters and masters.
  if (state.mode.gathers_parameters()) return write_master_shard();
  if (store.param_dtype() == DType::F32) {
    for (const int id : b.param_ids) {
      copy_from_host(host.data() + within(store, b, id), store.param_data(id), store.device(),
                     store.info(id).numel);
    }
    return;
  }
  std::vector<Bf16> rounded(host.size());
  for (std::size_t i = 0; i < host.size(); ++i) rounded[i] = master_to_bf16(host[i]);
  for (const int id : b.param_ids) {
    copy_bytes_from_host(rounded.data() + within(store, b, id), store.param_as<Bf16>(id),
                         store.device(), store.info(id).numel * dtype_size(DType::BF16));
  }
  if (!state.mode.steps_on(b, state.world.rank)) return;
  ZL_CHECK(opt.has_masters(), "bucket {}: a bf16 run's stepping rank without masters", b.index);
  if (state.mode.element_shards) return write_master_shard();
  for (const int id : b.param_ids) opt.write_master(id, host.data() + within(store, b, id));
}

void state_from_host(const TrainingState& state, const Bucket& b, const std::vector<float>& host) {
  RankOptimizer& opt = state.optimizer;
  const ElementRange& mine = opt.stepped(b.index);
  const auto ns = static_cast<int>(opt.state_names().size());
  for (int s = 0; s < ns; ++s) {
    copy_from_host(host.data() + s * b.numel + (mine.offset - b.offset),
                   opt.state_at(b.index, s, mine.offset), state.store.device(), mine.numel);
  }
}

std::map<std::string, std::string> checkpoint_metadata(const TrainingState& state) {
  const Config& c = state.config;
  const OptimizerConfig& o = c.optimizer;
  const std::int64_t per_epoch = state.batches_per_epoch;
  auto str = [](const auto& v) { return fmt::format("{}", v); };
  return {
      {"format", kCheckpointFormat},
      {"format_version", kCheckpointFormatVersion},
      {"zerolap_version", ZEROLAP_VERSION},
      {"step", str(state.position.step)},
      {"epoch", str(state.position.cursor / per_epoch)},
      {"sampler_position", str(state.position.cursor)},
      {"global_batch", str(c.data.batch_size * state.world.size)},
      {"samples_per_step", str(c.data.batch_size * state.world.size * c.train.grad_accum)},
      {"batches_per_epoch", str(per_epoch)},
      {"optimizer_step", str(state.optimizer.step_count())},
      {"total_steps", str(state.total_steps)},
      {"optimizer", to_string(o.kind)},
      {"optimizer_state", fmt::format("{}", fmt::join(state.optimizer.state_names(), ","))},
      {"lr", str(o.lr)},
      {"betas", fmt::format("[{}, {}]", o.beta1, o.beta2)},
      {"eps", str(o.eps)},
      {"weight_decay", str(o.weight_decay)},
      {"momentum", str(o.momentum)},
      {"dampening", str(o.dampening)},
      {"nesterov", o.nesterov ? "true" : "false"},
      {"lr_schedule", to_string(o.schedule)},
      {"warmup_steps", str(o.warmup_steps)},
      {"min_lr", str(o.min_lr)},
      {"world_size", str(state.world.size)},
      {"mode", to_string(c.parallel.mode)},
      {"overlap", to_string(c.parallel.overlap)},
      {"bucket_cap_mb", str(c.parallel.bucket_cap_mb)},
      // The run's precision; the parameter tensors are fp32 (masters) in every precision, so a
      // checkpoint resumes into any precision and loads into PyTorch as it is.
      {"precision", to_string(c.precision.compute)},
      {"reduce_dtype", dtype_name(c.precision.reduce_dtype)},
      {"master_weights", to_string(c.precision.master_weights)},
      {"buckets", str(state.plan.buckets.size())},
      {"config_hash", config_hash(c)},
      {"run_id", c.run_id},  // the run this checkpoint belongs to (run_identity.h)
      {"config", to_toml(c)},
  };
}

std::int64_t first_nonfinite(const float* values, std::int64_t n) {
  constexpr std::int64_t kBlock = 4096;
  for (std::int64_t at = 0; at < n; at += kBlock) {
    const std::int64_t m = std::min(kBlock, n - at);
    std::uint32_t any = 0;
    for (std::int64_t i = 0; i < m; ++i) {
      std::uint32_t bits;
      std::memcpy(&bits, values + at + i, sizeof bits);
      any |= (bits & 0x7f800000u) == 0x7f800000u ? 1u : 0u;  // exponent all ones: inf or NaN
    }
    if (any == 0) continue;
    for (std::int64_t i = 0; i < m; ++i) {
      if (!std::isfinite(values[at + i])) return at + i;
    }
  }
  return -1;
}

void require_finite(const float* values, std::int64_t first, std::int64_t n,
                    const std::string& tensor, const TrainingState& state) {
  const std::int64_t i = first_nonfinite(values, n);
  if (i < 0) return;
  // What `latest` names, if anything: a run that diverges before its first checkpoint has none
  // to fall back on, and the message must not promise one.
  const std::string& dir = state.config.checkpoint.dir;
  std::optional<std::string> latest;
  try {
    latest = latest_checkpoint(dir);
  } catch (const UserError&) {
  }
  const std::string kept =
      latest ? fmt::format("`latest` in '{}' still names the last finite checkpoint, {}", dir,
                           fs::path(*latest).filename().string())
             : fmt::format("no checkpoint was written before it ('{}' has no `latest`)", dir);
  throw RuntimeFailure(fmt::format(
      "checkpoint of step {} not written: '{}' holds a non-finite value ({} at element {}); "
      "the run diverged, and {} (lower optimizer.lr or optimizer.weight_decay, or set "
      "train.clip_grad_norm)",
      state.position.step, tensor, values[i], first + i, kept));
}

void write_checkpoint(const TrainingState& state, const std::string& path) {
  TraceSpan span(state.tracer, kMainTraceThread, "checkpoint", {{"step", state.position.step}});
  const World& world = state.world;
  const CheckpointComm comm(world.comm, wait_limit(state));
  fault_stop_point("checkpoint", world.rank);
  ParameterStore& store = state.store;
  const std::vector<std::string>& states = state.optimizer.state_names();
  const bool masters = masters_in_file(state);
  const std::int64_t slices = gathered_slices(state);
  const std::string temp = path + kCheckpointTempSuffix;
  // The file's name of a parameter's slice of the staging: its master under its own name, then
  // its state.
  const auto slice_name = [&](const ParameterInfo& p, std::int64_t slice) {
    return tensor_name(p.name, states, static_cast<int>(slice) - (masters ? 1 : 0));
  };

  std::unique_ptr<SafetensorsWriter> writer;
  std::vector<float> host;
  if (world.is_root()) {
    // File order = write order. fp32: parameters (registration order), then the state bucket by
    // bucket. bf16: bucket by bucket, each parameter's master under its name, then its state.
    std::vector<TensorSpec> tensors;
    if (!masters) {
      for (const ParameterInfo& p : store.parameters()) tensors.push_back({p.name, "F32", p.shape});
    }
    for (const Bucket& b : state.plan.buckets) {
      for (const int id : b.param_ids) {
        for (std::int64_t slice = 0; slice < slices; ++slice) {
          tensors.push_back({slice_name(store.info(id), slice), "F32", store.info(id).shape});
        }
      }
    }
    writer = std::make_unique<SafetensorsWriter>(temp, std::move(tensors),
                                                 checkpoint_metadata(state));
    for (int id = 0; id < store.count() && !masters; ++id) {
      const ParameterInfo& p = store.info(id);
      host.resize(static_cast<std::size_t>(p.numel));
      copy_to_host(store.param_data(id), store.device(), host.data(), p.numel);
      require_finite(host.data(), 0, p.numel, p.name, state);
      writer->write_floats(host.data(), p.numel);
    }
  }
  // See Note [One bucket at a time] and Note [Masters in checkpoints].
  for (const Bucket& b : state.plan.buckets) {
    if (slices == 0) break;
    const int holder = state_holder(state, b);
    const int source = holder == kEveryRank ? 0 : holder;
    if (state.mode.element_shards) {
      gather_shards(state, b, slices, host, comm);
    } else if (world.rank == source) {
      const ElementRange& stepped = state.optimizer.stepped(b.index);
      ZL_CHECK(stepped.offset == b.offset && stepped.numel == b.numel,
               "bucket {}: its state holder steps [{}, +{}), not the whole bucket", b.index,
               stepped.offset, stepped.numel);
      stepped_to_host(state, b, host);  // laid out [slice][b.numel]
      if (source != 0) send_floats(host.data(), slices * b.numel, 0, comm);
    }
    if (!world.is_root()) continue;
    if (source != 0) {
      host.resize(static_cast<std::size_t>(slices * b.numel));
      recv_floats(host.data(), slices * b.numel, source, comm);
    }
    for (const int id : b.param_ids) {
      const ParameterInfo& p = store.info(id);
      for (std::int64_t slice = 0; slice < slices; ++slice) {
        const std::string name = slice_name(p, slice);
        ZL_CHECK(writer->next_tensor() == name, "write order: {} next", writer->next_tensor());
        const float* values = host.data() + slice * b.numel + within(store, b, id);
        require_finite(values, 0, p.numel, name, state);
        writer->write_floats(values, p.numel);
      }
    }
  }
  if (world.is_root()) {
    writer->finish();
    checkpoint_fault_point("after_write", state.position.step);
    rename_durably(temp, path, "checkpoint ");
  }
  // The file is durable before any rank moves on.
  timed_barrier(comm.get(), comm.limit(), "the barrier after writing a checkpoint");
}

std::string save_checkpoint(const TrainingState& state) {
  const CheckpointConfig& c = state.config.checkpoint;
  ZL_CHECK(!c.dir.empty(), "save_checkpoint without checkpoint.dir");
  const auto start = std::chrono::steady_clock::now();
  const std::string name = checkpoint_file_name(state.position.step);
  const std::string path = (fs::path(c.dir) / name).string();
  if (state.world.is_root()) create_checkpoint_dir(c.dir);
  write_checkpoint(state, path);
  if (state.world.is_root()) {
    checkpoint_fault_point("after_rename", state.position.step);
    write_latest_pointer(c.dir, name);  // only now may a resume pick the new file
    // A run that diverges writes finite checkpoints of a bad state for a few steps before a step
    // turns non-finite; until the run ends, the one it resumed from (known good: a run completed
    // it and another loaded it) survives them (docs/design.md, "Divergence").
    const bool run_ended = state.position.step >= state.total_steps;
    prune_checkpoints(c.dir, c.keep, run_ended ? -1 : state.resumed_step, state.config.run_id);
    if (!state.quiet) {
      std::error_code ec;
      const auto bytes = fs::file_size(path, ec);
      fmt::print("zerolap: checkpoint step {} -> {} ({:.1f} MB, {:.2f} s)\n", state.position.step,
                 path, ec ? 0.0 : static_cast<double>(bytes) / 1e6,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      std::fflush(stdout);
    }
  }
  return path;
}

void resume_at(const TrainingState& state, const CheckpointFacts& facts, const std::string& path,
               const std::string& extra, const std::map<std::string, std::string>& metadata) {
  const World& world = state.world;
  const std::int64_t global_batch = state.config.data.batch_size * world.size;
  const std::int64_t cursor = convert_cursor(facts, global_batch, state.batches_per_epoch);
  state.position = TrainingPosition{facts.step, cursor};
  state.resumed_step = facts.step;
  state.optimizer.set_step_count(facts.optimizer_step);
  const TrainConfig& train = state.config.train;
  if (train.steps == 0 && train.epochs > 0) {  // the passes left, in this world's batches
    state.total_steps = facts.step + steps_left_in_epochs(cursor, state.batches_per_epoch,
                                                          train.grad_accum, train.epochs);
    state.optimizer.set_total_steps(state.total_steps);
  }
  if (!world.is_root() || state.quiet) return;
  fmt::print("zerolap: resumed from {} at step {} (epoch {}; written on {} rank{}{})\n", path,
             facts.step, cursor / state.batches_per_epoch, facts.world_size,
             facts.world_size == 1 ? "" : "s", extra);
  // The same samples per step (data.global_batch_size on another world size): cursor
  // conversion lands on the same sample at a step boundary, so the order is the original's.
  const std::int64_t step_samples = global_batch * state.config.train.grad_accum;
  const bool same_step_samples =
      metadata_value(metadata, "samples_per_step") == std::to_string(step_samples);
  if (facts.global_batch != global_batch && same_step_samples) {
    fmt::print("zerolap: note: {} samples per step as written, now {} per rank x {} rank{} x {} "
               "micro-batch{}: the same samples in the same order\n",
               step_samples, state.config.data.batch_size, world.size, world.size == 1 ? "" : "s",
               state.config.train.grad_accum, state.config.train.grad_accum == 1 ? "" : "es");
  } else if (facts.global_batch != global_batch) {
    fmt::print("zerolap: note: the global batch changed from {} to {} samples; continuing at "
               "batch {} of epoch {}, so the sample order differs from the original run's\n",
               facts.global_batch, global_batch, cursor % state.batches_per_epoch,
               cursor / state.batches_per_epoch);
  }
  const auto changed = result_differences(facts.config_toml, to_toml(state.config));
  if (!changed.empty()) {
    fmt::print("zerolap: note: the config differs from the checkpoint's in {}\n",
               name_list(changed, 8));
  }
  std::fflush(stdout);
}

void load_checkpoint(const TrainingState& state, const std::string& path) {
  const World& world = state.world;
  // A sharded checkpoint (its directory or manifest; rank 0 knows the path) loads on its own path.
  int sharded = world.is_root() && sharded_manifest_of(path) ? 1 : 0;
  if (world.size > 1) {
    timed_bcast(&sharded, 1, MPI_INT, 0, world.comm, wait_limit(state),
                "broadcasting the checkpoint's format");
  }
  if (sharded) {
    load_sharded_checkpoint(state, world.is_root() ? *sharded_manifest_of(path) : std::string());
    return;
  }
  ParameterStore& store = state.store;
  RankOptimizer& opt = state.optimizer;
  const auto ns = static_cast<std::int64_t>(opt.state_names().size());

  // Everything that can be wrong with the file is found here, before any rank receives a byte.
  std::unique_ptr<SafetensorsReader> file;
  CheckpointFacts facts;
  agree_on_user_errors(world, [&] {
    if (!world.is_root()) return;
    file = std::make_unique<SafetensorsReader>(path);
    facts = check_checkpoint(*file, store, opt.config(), opt.state_names());
  }, state.config.runtime.timeout_s);

  const CheckpointComm comm(world.comm, wait_limit(state));
  constexpr int kFacts = static_cast<int>(std::size(kFactKeys));
  std::int64_t position[kFacts];
  for (int i = 0; i < kFacts; ++i) position[i] = facts.*kFactKeys[i].second;
  timed_bcast(position, kFacts, MPI_INT64_T, 0, comm.get(), comm.limit(),
              "broadcasting the checkpoint's position");
  for (int i = 0; i < kFacts; ++i) facts.*kFactKeys[i].second = position[i];

  std::vector<float> host;
  // Bucket b's tensors `which` = first .. first + count - 1 (tensor_name: -1 the values, then the
  // states) into `host`, laid out [which - first][b.numel]: read on rank 0, zeros elsewhere.
  const auto stage_bucket = [&](const Bucket& b, int first, std::int64_t count) {
    host.assign(static_cast<std::size_t>(count * b.numel), 0.0f);
    if (!world.is_root()) return;
    for (const int id : b.param_ids) {
      const ParameterInfo& p = store.info(id);
      for (int which = first; which < first + count; ++which) {
        file->read_f32(tensor_name(p.name, opt.state_names(), which), p.shape,
                       host.data() + (which - first) * b.numel + within(store, b, id));
      }
    }
  };
  // Parameters are replicated: every rank gets every bucket's fp32 values from rank 0 (in bf16
  // the stepping ranks keep them as masters; Note [Masters in checkpoints]).
  for (const Bucket& b : state.plan.buckets) {
    stage_bucket(b, -1, 1);
    bcast_floats(host.data(), b.numel, comm);
    parameters_from_host(state, b, host);
  }
  // State goes to its holder in the current plan (see Note [One bucket at a time]).
  for (const Bucket& b : state.plan.buckets) {
    if (ns == 0) break;
    const int holder = state_holder(state, b);
    stage_bucket(b, 0, ns);
    if (holder == kEveryRank) {
      bcast_floats(host.data(), ns * b.numel, comm);
    } else if (holder != 0 && world.is_root()) {
      send_floats(host.data(), ns * b.numel, holder, comm);
    } else if (holder != 0 && world.rank == holder) {
      recv_floats(host.data(), ns * b.numel, 0, comm);
    }
    if (holder == kEveryRank || world.rank == holder) state_from_host(state, b, host);
  }

  // Only rank 0 opened the file; the metadata feeds rank 0's notes alone.
  resume_at(state, facts, path, "", file ? file->metadata() : std::map<std::string, std::string>{});
}

void prepare_checkpoints(const TrainingState& state) {
  const CheckpointConfig& c = state.config.checkpoint;
  const World& world = state.world;
  std::string path;
  agree_on_user_errors(world, [&] {
    if (!world.is_root()) return;
    if (!c.dir.empty()) create_checkpoint_dir(c.dir);
    if (const auto resume = checkpoint_to_resume(c)) {
      path = *resume;
      if (c.resume_path.empty() && !latest_checkpoint(c.dir) && !state.quiet) {
        fmt::print("zerolap: '{}' has no `latest` (removed, or the run stopped before writing "
                   "it): resuming from the newest checkpoint of its run, '{}'\n",
                   c.dir, path);
      }
    } else if (c.resume && !state.quiet) {
      fmt::print("zerolap: checkpoint.resume = true but '{}' has no checkpoint yet: starting at "
                 "step 0\n",
                 c.dir);
    }
  }, state.config.runtime.timeout_s);
  if (!c.dir.empty() && c.format == CheckpointFormat::Sharded && world.size > 1) {
    require_shared_checkpoint_dir(state);
  }
  int resume = world.is_root() && !path.empty() ? 1 : 0;
  if (world.size > 1) {
    timed_bcast(&resume, 1, MPI_INT, 0, world.comm, wait_limit(state),
                "broadcasting whether to resume");
  }
  if (resume) load_checkpoint(state, path);
}

}  // namespace zl
