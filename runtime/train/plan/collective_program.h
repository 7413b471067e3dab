// The collective program of a mode: for a ModePlan (its micro_batches: train.grad_accum) and a
// bucket plan, the ordered list of the collectives one step issues, each naming its
// communicator, op, bucket, elements and micro-batch. The step checks what it issues against it
// (ProgramCheck), and `zerolap plan`, the bench and the scaling model count and time it.
//
// Note [Collective program]: invariant 1 (docs/design.md) is per communicator, so the program is
// one sequence per communicator (CommRole): the gradients' collectives on the reduce communicator,
// the publishes and gathers on the broadcast communicator, and with hybrid sharding each shard's
// all-reduce across the replicas on the replica communicator (Note [Replica all-reduce]). Only the
// order within a communicator is fixed; across them the streams overlap. The three places that
// issue a step's collectives (Reducer, BucketOps::publish, ParameterGather in a training pass) hand
// each one to ProgramCheck::issued, which compares it with the next entry of its communicator's
// sequence and throws an InternalError naming both on a mismatch, in every build (a comparison and
// an increment). The sequences wrap at the step's end, so nothing resets them between steps (the
// interleaved continuations still issue after train_step returned). A skipped step (the verdict
// came first and was not finite) publishes nothing: its schedule skips those entries. What is
// outside a step (the initial broadcast, evaluation's and checkpoints' gathers, the verdict's and
// metrics' all-reduces) is in no program.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/comm/comm_options.h"
#include "runtime/comm/communicator.h"
#include "runtime/train/plan/bucket_plan.h"
#include "runtime/train/plan/mode_plan.h"

namespace zl {

// The communicators a step issues on (runtime/train/run/trainer_setup.h names them); Replica only
// with hybrid sharding.
enum class CommRole : unsigned char { Reduce, Broadcast, Replica };
inline constexpr int kCommRoles = 3;
const char* comm_role_name(CommRole role);  // "comm.reduce", "comm.broadcast", "comm.replica"

// One collective of a step.
struct ProgramEntry {
  CommRole comm = CommRole::Reduce;
  CollectiveOp op = CollectiveOp::AllReduce;
  int bucket = 0;
  // Of `dtype`: the bucket's (a reduce-scatter or all-gather moves elements / group size per
  // rank); a replica all-reduce's, the shard's.
  std::int64_t elements = 0;
  int micro_batch = 0;        // stages 2 and 3 reduce every micro-batch; the others in the last
  DType dtype = DType::F32;   // gradients: reduce_dtype; publishes and gathers: param_dtype
  int root = -1;  // reduce / broadcast: the bucket's assigned rank; -1 for the others
  std::int64_t bytes() const { return elements * dtype_size(dtype); }
  bool operator==(const ProgramEntry&) const = default;
};
// "comm.reduce reduce_scatter of bucket 2 (4096 elements of f32, micro-batch 0)".
std::string describe(const ProgramEntry& entry);

// Every collective of one step of `mode` (all its micro_batches) on `plan`: the reduce
// communicator's sequence, then the broadcast communicator's, then the replica communicator's.
std::vector<ProgramEntry> collective_program(const ModePlan& mode, const BucketPlan& plan);
// Per entry of collective_program(mode, plan): whether forward issues it (stage 3's gathers before
// forward reads a bucket; every other collective runs in or after backward).
std::vector<bool> forward_entries(const ModePlan& mode, const BucketPlan& plan);

// Where each communicator of a step sits on the modelled machine (Note [Link model],
// runtime/comm/link/simulated_link.h), for a job of `world` ranks: the reduce and broadcast
// communicators span the shard group (G consecutive ranks; without a shard group, every rank),
// the replica communicator one rank of each group (world / G ranks, G apart). `mode.replicas`
// must be the world's (make_run_mode_plan). The trainer wraps each communicator in the link of
// its span, and `zerolap plan` and the bench time each program entry on its communicator's span.
struct CommPlace {
  int members = 1;  // the communicator's ranks (of the job), `stride` apart
  int stride = 1;
  LinkSpan span;    // link_span(link, world, members, stride)
};
struct CommSpans {
  std::array<CommPlace, kCommRoles> places{};
  const CommPlace& place(CommRole role) const { return places[static_cast<std::size_t>(role)]; }
  const LinkSpan& of(CommRole role) const { return place(role).span; }
};
CommSpans comm_spans(const ModePlan& mode, const LinkConfig& link, int world);

// The step's check against its program (Note [Collective program]). Each communicator's entries
// are issued by one thread at a time; `checked` counts them (tests: whole steps after synchronize).
class ProgramCheck {
 public:
  explicit ProgramCheck(const std::vector<ProgramEntry>& program);
  // A step's collective was issued: it must be the next entry of its communicator's sequence.
  void issued(const ProgramEntry& actual);
  // The next `count` entries of `comm`, each one of `op`, are not issued this step (a skipped
  // step's publishes).
  void skip(CommRole comm, CollectiveOp op, int count);
  std::int64_t checked(CommRole comm) const { return at(comm).checked.load(); }
  std::int64_t entries(CommRole comm) const {
    return static_cast<std::int64_t>(at(comm).entries.size());
  }

 private:
  struct Sequence {
    std::vector<ProgramEntry> entries;
    std::atomic<std::int64_t> checked{0};
  };
  const Sequence& at(CommRole comm) const { return sequences_[static_cast<std::size_t>(comm)]; }
  const ProgramEntry& next(CommRole comm);
  std::array<Sequence, kCommRoles> sequences_;
};

}  // namespace zl
