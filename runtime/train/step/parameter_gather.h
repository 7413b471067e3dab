// ZeRO stage 3 (parallel.zero_stage = 3, docs/design.md "Element shards"): each rank keeps only
// its shard of every bucket's parameters between steps; forward and backward all-gather a bucket
// into a gather buffer just before its first layer reads it, `parallel.prefetch` buckets ahead,
// and release it after its last layer (forward: unless parallel.reshard_after_forward = false).
//
// Note [Parameter gathers]: the order of forward's parameter reads is registration order, which
// visits buckets from the last to bucket 0 (Note [Flat layout]: buckets are cut in reverse
// registration order), and backward reads (TapeNode::reads_param) visit them from bucket 0 up,
// skipping those without Bucket::read_in_backward (biases and the first layer's weight are read
// in forward only), which backward's prefetch skips too.
// So when a layer first reads bucket b, every bucket behind b in that pass is done: forward
// releases the buckets above b, backward those below. Bucket 0 is the last forward reads and the
// first backward reads: it stays resident between the two; likewise the last bucket stays from one
// micro-batch's backward to the next one's forward. A gather of b is issued only after b's step
// (BucketOps::wait_for_bucket: the interleaved continuation) and all-gathers the rank's shard into
// the buffer (Communicator::all_gather_from) on the broadcast communicator, issued from the compute
// stream; the same reads give the same issue order on every rank (invariant 1). The collective
// reads the shard until it completes; b's next step comes after every gather of b was waited for
// (b's forward reads it, and so does b's backward where it reads b), so a step never writes a shard
// being read. A released buffer is reused by a later gather only after the released gather
// completed (CPU: a host wait) and, on CUDA, after the compute work issued so far (the all-gather
// is ordered behind it), so no layer still reading it is overwritten.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/device_buffer.h"
#include "base/exec_context.h"
#include "models/parameter_store.h"
#include "runtime/comm/communicator.h"
#include "runtime/train/plan/bucket_plan.h"
#include "runtime/train/step/bucket_ops.h"
#include "runtime/train/plan/collective_program.h"
#include "runtime/train/plan/mode_plan.h"
#include "runtime/train/step/step_context.h"

namespace zl {

// Stage 3's parameters between steps: this rank's shard of every bucket (ModePlan::stepped_range
// elements of the store's dtype). Made before the optimizer, which steps them in place, and the
// gather, which all-gathers them: both are built with them.
struct ParameterShards {
  // `initial`: the model's fp32 initial values (Model::initial_values); each shard starts from
  // those of its range (bf16: master_to_bf16 of them, as a flat bf16 store would).
  ParameterShards(const ModePlan& mode, const BucketPlan& plan, const ParameterStore& store,
                  int rank, const InitialValues& initial);
  void* at(int bucket) const { return buckets[static_cast<std::size_t>(bucket)].raw(); }
  // Allocated: RankMemory::parameters less the gather buffers.
  std::int64_t bytes() const { return total_bytes(buckets); }
  // The sum of squares of the shards (the per-window divergence check: summed over ranks it
  // covers every parameter once). Reads back to the host: call with nothing in flight.
  double sum_of_squares(const ExecContext& exec) const;

  std::vector<DeviceBuffer> buckets;  // [bucket]
};

class ParameterGather {
 public:
  // Every reference must outlive the gather. A training pass's gathers are checked against the
  // step's program (Note [Collective program]); each follows the bucket's step (`bucket_ops`).
  ParameterGather(const StepContext& step, const ParameterShards& shards, BucketOps& bucket_ops,
                  Communicator& comm);

  // The param-use hook of forward: parameter `param_id` is gathered (waiting for its bucket's
  // gather, prefetching the next ones) and bound when this returns.
  void before_forward_read(int param_id) { read(param_id, Pass::Forward, InProgram::Yes); }
  // The before-read hook of backward, the same in backward order.
  void before_backward_read(int param_id) { read(param_id, Pass::Backward, InProgram::Yes); }
  // The param-use hook of an evaluation's forward: as before_forward_read, outside the step's
  // collective program.
  void before_eval_read(int param_id) { read(param_id, Pass::Forward, InProgram::No); }
  // After a step's last backward, and after a forward that no backward follows (evaluation):
  // every gather buffer released, every parameter unbound.
  void release_all() {
    release_below(static_cast<int>(resident_.size()));
    micro_ = 0;
  }
  // After an earlier micro-batch's backward: the parameters change only in the step, so the last
  // bucket - the first the next forward reads, and the last backward reads or prefetches - stays
  // gathered if backward (or, without reshard_after_forward, forward) left it so; the others are
  // released.
  void release_for_next_micro_batch() {
    release_below(static_cast<int>(resident_.size()) - 1);  // all but the first in forward
    ++micro_;
  }
  // The gathers of one forward without its compute: every bucket in forward order, each released
  // at once (evaluation on a rank with fewer batches than another; invariant 1).
  void gather_pass();

  // Allocated bytes of the gather buffers (RankMemory::gather_buffers).
  std::int64_t gather_bytes() const { return total_bytes(buffers_); }
  // Collective (every rank, nothing in flight): the whole flat layout as fp32 on the host, each
  // bucket all-gathered into a gather buffer in turn (tests).
  std::vector<float> full_parameters();

 private:
  enum class Pass { Forward, Backward };
  enum class InProgram : bool { No, Yes };  // a training pass's gather, or another one
  struct Resident {
    int slot = -1;  // gather buffer; -1: not gathered
    Work work;      // the gather
    bool waited = false;
  };
  void read(int param_id, Pass pass, InProgram in_program);
  void issue(int bucket, InProgram in_program);
  void wait(int bucket);
  void release(int bucket);
  // Releases buckets [0, end) and starts the next pass as a forward.
  void release_below(int end);

  const StepContext& step_;
  const ParameterShards& shards_;
  BucketOps& bucket_ops_;
  Communicator& comm_;
  int micro_ = 0;  // the training pass's micro-batch (release_for_next_micro_batch counts)
  std::vector<DeviceBuffer> buffers_;  // gather buffers, each of the largest bucket
  std::vector<int> free_;              // indices into buffers_
  std::vector<Resident> resident_;     // [bucket]
  int current_ = -1;                   // the bucket the pass read last
  Pass pass_ = Pass::Forward;
};

}  // namespace zl
