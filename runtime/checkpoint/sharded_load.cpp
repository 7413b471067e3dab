// Loading a sharded checkpoint (see sharded_checkpoint.h) into the current plan, whatever mode,
// stage, world size and precision wrote it. Rank 0 reads and checks the manifest and sends its
// text to every rank; each rank checks the CRC32 of every world-th shard (so the whole checkpoint
// is checked once, in parallel) and the headers of the shards it reads; then each rank, bucket by
// bucket of its own plan, reads the elements it needs (Note [Shard pieces]) with positioned reads
// into one bucket's host staging, and restores them as the single-file loader does.
#include <algorithm>
#include <map>
#include <memory>

#include <fmt/format.h>

#include "base/errors.h"
#include "base/regular_file.h"
#include "runtime/checkpoint/files/checkpoint_files.h"
#include "runtime/checkpoint/checkpoint_comm.h"
#include "runtime/checkpoint/checkpoint_internal.h"
#include "runtime/checkpoint/files/checkpoint_values.h"
#include "runtime/checkpoint/files/shard_reader.h"
#include "runtime/checkpoint/sharded_checkpoint.h"

namespace zl {

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw UserError(fmt::format("sharded checkpoint '{}': {}", path, what));
}

// The manifest's facts, checked against this run's model and optimizer. Note [Loaded values]:
// every fact of the manifest passes here before the load uses it.
CheckpointFacts check_manifest(const Manifest& m, const std::string& path,
                               const ParameterStore& store, const RankOptimizer& opt) {
  // What needs no model first: `inspect` and `consolidate` run the same function.
  CheckpointFacts facts = check_manifest_facts(m, path);
  const std::string kind = metadata_value(m.metadata, "optimizer");
  if (kind != to_string(opt.config().kind)) {
    fail(path,
         fmt::format("written with optimizer.kind = \"{}\", the config has \"{}\": set "
                     "optimizer.kind = \"{}\" to resume from it",
                     escaped_excerpt(kind), to_string(opt.config().kind), escaped_excerpt(kind)));
  }
  if (m.state_names != opt.state_names()) {
    fail(path, fmt::format("holds optimizer state [{}], this optimizer keeps [{}]",
                           fmt::join(m.state_names, ","), fmt::join(opt.state_names(), ",")));
  }
  std::map<std::string, std::vector<std::int64_t>> shapes;  // the manifest's parameters
  for (const ManifestParameter& p : m.parameters) shapes[p.name] = p.shape;
  for (const ParameterInfo& p : store.parameters()) {
    const auto it = shapes.find(p.name);
    if (it == shapes.end()) {
      fail(path, fmt::format("has no parameter '{}': it was written for another model (compare "
                             "model.kind and model.widths)",
                             p.name));
    }
    if (it->second != p.shape) {
      fail(path, fmt::format("parameter '{}' has shape {}, this model's has {}: it was written "
                             "for another model",
                             p.name, format_shape(it->second), format_shape(p.shape)));
    }
    shapes.erase(it);
  }
  if (!shapes.empty()) {
    fail(path, fmt::format("holds parameter '{}', which this model does not have",
                           escaped_excerpt(shapes.begin()->first)));
  }
  return facts;
}

void bcast_string(std::string& s, const CheckpointComm& comm, const char* what) {
  std::int64_t n = static_cast<std::int64_t>(s.size());
  timed_bcast(&n, 1, MPI_INT64_T, 0, comm.get(), comm.limit(), what);
  s.resize(static_cast<std::size_t>(n));
  constexpr std::int64_t kChunk = std::int64_t{1} << 30;
  for (std::int64_t at = 0; at < n; at += kChunk) {
    timed_bcast(s.data() + at, static_cast<int>(std::min(kChunk, n - at)), MPI_CHAR, 0, comm.get(),
                comm.limit(), what);
  }
}

}  // namespace

void load_sharded_checkpoint(const TrainingState& state, const std::string& root_path) {
  const World& world = state.world;
  ParameterStore& store = state.store;
  RankOptimizer& opt = state.optimizer;
  const double timeout_s = state.config.runtime.timeout_s;
  const CheckpointComm comm(world.comm, WaitLimit{world.rank, timeout_s});

  std::string path = root_path, text;
  agree_on_user_errors(
      world,
      [&] {
        if (!world.is_root()) return;
        text = read_manifest_text(path);
        check_manifest(parse_manifest(text, path), path, store, opt);
      },
      timeout_s);
  bcast_string(path, comm, "broadcasting the checkpoint manifest's path");
  bcast_string(text, comm, "broadcasting the checkpoint manifest");

  Manifest m;
  CheckpointFacts facts;
  std::unique_ptr<ShardSet> shards;
  const auto ns = static_cast<int>(opt.state_names().size());
  std::vector<float> host, st;
  // Everything that can be wrong with a shard is a UserError inside here, on whichever rank finds
  // it; the reads themselves need no message from another rank.
  agree_on_user_errors(
      world,
      [&] {
        m = parse_manifest(text, path);
        facts = check_manifest(m, path, store, opt);
        shards = std::make_unique<ShardSet>(m, path);
        for (std::size_t i = static_cast<std::size_t>(world.rank); i < m.shards.size();
             i += static_cast<std::size_t>(world.size)) {
          shards->verify(i);
        }
        for (const Bucket& b : state.plan.buckets) {
          // What this rank holds of bucket b: every parameter element (stage 3: its shard of them),
          // and the state of the elements it steps.
          const ElementRange whole{b.offset, b.numel};
          const ElementRange& stepped = opt.stepped(b.index);
          const ElementRange params = state.mode.gathers_parameters() ? stepped : whole;
          const bool has_state = ns > 0 && stepped.numel > 0 && state.mode.steps_on(b, world.rank);
          host.assign(static_cast<std::size_t>(b.numel), 0.0f);
          if (has_state) st.assign(static_cast<std::size_t>(ns * b.numel), 0.0f);
          // Each run this rank loads: the values (which = -1) into `host`, then each state `which`
          // into `st`.
          for (int which = -1; which < (has_state ? ns : 0); ++which) {
            float* into = which < 0 ? host.data() : st.data() + which * b.numel;
            const ElementRange& runs = which < 0 ? params : stepped;
            for_each_param_run(store, b, runs, [&](int id, std::int64_t lo, std::int64_t hi) {
              const ParameterInfo& p = store.info(id);
              float* out = into + p.offset + lo - b.offset;
              shards->read(p.name, which, lo, hi, out);
              // Note [Loaded values]: bucket b's parameters (`host`) and state (`st`) as read,
              // before they reach the device: every value is checked here (checkpoint_values.h),
              // on the rank that read it, inside the agreement, so a bad one is exit 2 on every
              // rank.
              check_checkpoint_values(path, tensor_name(p.name, opt.state_names(), which), out,
                                      hi - lo, lo);
            });
          }
          parameters_from_host(state, b, host);
          if (has_state) state_from_host(state, b, st);
        }
      },
      timeout_s);

  const std::size_t shard_count = m.shards.size();
  resume_at(state, facts, path,
            fmt::format(", {} shard{}", shard_count, shard_count == 1 ? "" : "s"), m.metadata);
}

}  // namespace zl
