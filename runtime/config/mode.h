// Mode: one parallel mode as one value - the ZeRO stage (0 = ddp), the overlap and the collective -
// with its name, its parse and the list of every mode (all_modes) that config validation, `zerolap
// plan`, the bench, the scaling model and the tests enumerate. What a mode implies (its parts, its
// collective program) is derived from this value once, in runtime/train/plan/mode_plan.h;
// check_shard_group holds its shard group against a job's world size.
//
// Note [Mode value]: a mode is (stage, overlap, collective); the ownership follows from the
// collective (a bucket per rank for the bucket collectives, a shard of every bucket for
// reduce_scatter_allgather) and ddp is stage 0 (no overlap, all-reduce, nothing sharded). Stages
// 2 and 3 exist only with element ownership. The shard group is the one axis beyond those:
// element shards spread over groups of G consecutive ranks and replicated across the groups
// (hybrid sharding, parallel.shard_group; docs/design.md "Hybrid sharding"), named
// "hsdp<stage>/<overlap>@G"; it adds the cross-replica communicator to the collective program
// (runtime/train/plan/collective_program.h).
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/config/config.h"

namespace zl {

// Who keeps a bucket's optimizer state and steps it.
enum class Ownership {
  Replicated,  // ddp: every rank steps every bucket
  Bucket,      // one assigned rank per bucket (allreduce_broadcast, reduce_broadcast)
  Element,     // rank r owns shard r of every bucket (reduce_scatter_allgather)
};

struct Mode {
  int stage = 0;  // 0: ddp; 1-3: ZeRO stages (2 and 3 with element ownership only)
  Overlap overlap = Overlap::None;                                  // None in ddp
  CollectiveKind collective = CollectiveKind::AllreduceBroadcast;  // AllreduceBroadcast in ddp
  // Element shards only: the ranks of one shard group (parallel.shard_group); 0: the whole world.
  int shard_group = 0;

  bool ddp() const { return stage == 0; }
  Ownership ownership() const;
  // The copies of every shard in a job of `world` ranks: world / shard_group, or 1.
  int replicas(int world) const { return shard_group > 0 ? std::max(1, world / shard_group) : 1; }
  // "ddp", "zero/<overlap>/<collective>", "zero2/...", "zero3/...", and with a shard group
  // "hsdp<stage>/<overlap>@<G>": as logs and the bench name it.
  std::string name() const;
  bool operator==(const Mode&) const = default;
};

// The mode of [parallel] (its mode, overlap, collective and zero_stage keys), and the reverse.
Mode mode_of(const ParallelConfig& parallel);
void set_mode(ParallelConfig& parallel, const Mode& mode);
// The mode named `name` (as Mode::name writes it); nullopt for any other text.
std::optional<Mode> parse_mode(std::string_view name);
// Every mode, in the order the bench and `zerolap plan` list them: ddp, then stage 1 x
// {none, after_backward, interleaved} x {allreduce_broadcast, reduce_broadcast,
// reduce_scatter_allgather}, then stages 2 and 3 x the overlaps with reduce_scatter_allgather;
// then, for each G of `shard_groups`, stages 1-3 x the overlaps with shard group G.
std::vector<Mode> all_modes(const std::vector<int>& shard_groups = {});

// parallel.shard_group must divide the `world` ranks of the job, and link.ranks when it is set
// (above or below the world): UserError naming both (exit 2).
void check_shard_group(const Config& config, int world);

}  // namespace zl
