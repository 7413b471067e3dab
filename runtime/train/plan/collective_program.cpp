// The collective program of a step and its check (see Note [Collective program]).
#include "runtime/train/plan/collective_program.h"

#include <fmt/format.h>

#include "base/errors.h"
#include "runtime/comm/link/simulated_link.h"

namespace zl {

const char* comm_role_name(CommRole role) {
  switch (role) {
    case CommRole::Reduce: return "comm.reduce";
    case CommRole::Broadcast: return "comm.broadcast";
    case CommRole::Replica: return "comm.replica";
  }
  return "?";
}

std::string describe(const ProgramEntry& e) {
  return fmt::format("{} {} of bucket {} ({} elements of {}{}, micro-batch {})",
                     comm_role_name(e.comm), collective_name(e.op), e.bucket, e.elements,
                     dtype_name(e.dtype), e.root >= 0 ? fmt::format(", root {}", e.root) : "",
                     e.micro_batch);
}

namespace {

// The program, and per entry whether forward issues it (stage 3's gathers before forward reads a
// bucket).
struct Program {
  std::vector<ProgramEntry> entries;
  std::vector<bool> forward;
  void add(const ProgramEntry& entry, bool in_forward = false) {
    entries.push_back(entry);
    forward.push_back(in_forward);
  }
};

Program program_of(const ModePlan& mode, const BucketPlan& plan) {
  Program out;
  // Gradients: stages 2 and 3 reduce every micro-batch into the shard; the others once, in the
  // last.
  const int reducing = mode.pools_gradients() ? mode.micro_batches : 1;
  for (int micro = mode.micro_batches - reducing; micro < mode.micro_batches; ++micro) {
    for (const Bucket& b : plan.buckets) {
      out.add({CommRole::Reduce, mode.bucket_collective, b.index, b.numel, micro, mode.reduce_dtype,
               mode.bucket_collective == CollectiveOp::Reduce ? b.assigned_rank : -1});
    }
  }
  // Publishes after the step, in bucket order (Note [Tail broadcast order] swaps the last two
  // buckets' publishes in interleaved mode).
  if (mode.broadcast_after_step) {
    std::vector<const Bucket*> order;
    for (const Bucket& b : plan.buckets) order.push_back(&b);
    if (mode.schedule == ScheduleKind::ZeroInterleaved && order.size() >= 2) {
      std::iter_swap(order.end() - 1, order.end() - 2);
    }
    for (const Bucket* b : order) {
      out.add({CommRole::Broadcast, mode.parameter_collective, b->index, b->numel,
               mode.micro_batches - 1, mode.param_dtype,
               mode.parameter_collective == CollectiveOp::Broadcast ? b->assigned_rank : -1});
    }
  }
  if (mode.gathers_parameters()) {
    // Stage 3, every micro-batch: forward gathers every bucket in forward order (the last bucket
    // first), backward every bucket it reads in backward order again; bucket 0, the last forward
    // needs and the first backward needs, stays resident between them, and the last bucket from
    // one micro-batch's backward to the next one's forward (Note [Parameter gathers]). So forward
    // + backward gathers + reduce-scatter move about 1.5x ddp's bytes per micro-batch.
    const auto n = static_cast<int>(plan.buckets.size());
    const auto gather = [&](int b, int micro, bool in_forward) {
      const Bucket& bucket = plan.buckets[static_cast<std::size_t>(b)];
      out.add({CommRole::Broadcast, CollectiveOp::AllGather, b, bucket.numel, micro,
               mode.param_dtype, -1},
              in_forward);
    };
    // Backward gathers only the buckets it reads (Bucket::read_in_backward: not one holding
    // only the first layer); the last bucket stays for the next micro-batch if backward kept it,
    // or if forward never released it: without resharding, or as the only bucket (bucket 0).
    const bool last_stays =
        !mode.reshard_after_forward || plan.buckets.back().read_in_backward || n == 1;
    for (int micro = 0; micro < mode.micro_batches; ++micro) {
      for (int b = micro > 0 && last_stays ? n - 2 : n - 1; b >= 0; --b) gather(b, micro, true);
      if (!mode.reshard_after_forward) continue;
      for (int b = 1; b < n; ++b) {
        if (plan.buckets[static_cast<std::size_t>(b)].read_in_backward) gather(b, micro, false);
      }
    }
  }
  if (mode.replicas > 1) {
    // Hybrid sharding: each bucket's shard across the replicas, once per step, in bucket order,
    // on the gradients' wire (Note [Replica all-reduce]). plan.world_size is the shard group.
    for (const Bucket& b : plan.buckets) {
      out.add({CommRole::Replica, CollectiveOp::AllReduce, b.index, b.numel / plan.world_size,
               mode.micro_batches - 1, mode.reduce_dtype, -1});
    }
  }
  return out;
}

}  // namespace

std::vector<ProgramEntry> collective_program(const ModePlan& mode, const BucketPlan& plan) {
  return program_of(mode, plan).entries;
}

std::vector<bool> forward_entries(const ModePlan& mode, const BucketPlan& plan) {
  return program_of(mode, plan).forward;
}

CommSpans comm_spans(const ModePlan& mode, const LinkConfig& link, int world) {
  const int group = mode.replicas > 1 ? mode.mode.shard_group : world;
  ZL_CHECK(group * mode.replicas == world,
           "comm_spans: {} replicas of groups of {} are not {} ranks", mode.replicas, group, world);
  const CommPlace in_group{group, 1, link_span(link, world, group, 1)};
  // Without replicas no entry runs on the replica communicator; the group's place stands in.
  const CommPlace replica =
      mode.replicas > 1
          ? CommPlace{mode.replicas, group, link_span(link, world, mode.replicas, group)}
          : in_group;
  return CommSpans{.places = {in_group, in_group, replica}};  // Reduce, Broadcast, Replica
}

ProgramCheck::ProgramCheck(const std::vector<ProgramEntry>& program) {
  for (const ProgramEntry& e : program) {
    sequences_[static_cast<std::size_t>(e.comm)].entries.push_back(e);
  }
}

const ProgramEntry& ProgramCheck::next(CommRole comm) {
  Sequence& s = sequences_[static_cast<std::size_t>(comm)];
  const auto size = static_cast<std::int64_t>(s.entries.size());
  const std::int64_t at = s.checked.fetch_add(1, std::memory_order_relaxed);
  if (size == 0) {
    throw InternalError(fmt::format("{}: a step's collective where its program has none",
                                    comm_role_name(comm)));
  }
  return s.entries[static_cast<std::size_t>(at % size)];
}

void ProgramCheck::issued(const ProgramEntry& actual) {
  const ProgramEntry& expected = next(actual.comm);
  if (actual == expected) return;
  throw InternalError(fmt::format("the step issued {} where its collective program has {} next",
                                  describe(actual), describe(expected)));
}

void ProgramCheck::skip(CommRole comm, CollectiveOp op, int count) {
  for (int i = 0; i < count; ++i) {
    const ProgramEntry& expected = next(comm);
    if (expected.op == op) continue;
    throw InternalError(fmt::format("a skipped step left out a {} where its collective program "
                                    "has {} next",
                                    collective_name(op), describe(expected)));
  }
}

}  // namespace zl
