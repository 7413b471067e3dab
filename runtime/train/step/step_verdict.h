// StepVerdict: whether one optimizer step is finite - its loss on every rank and the global norm
// of its reduced gradient - as one answer every rank holds identically. agree_on_step gets it
// with the step's one small all-reduce (the one the clip norm needed anyway), and reports which
// ranks saw what. Policy and placement: docs/design.md, "Divergence".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/errors.h"
#include "runtime/comm/communicator.h"

namespace zl {

// Where each rank's gradient share comes from: every rank holds the whole reduced gradient (ddp),
// or each holds the buckets it steps and the global sum is the sum of the shares (zero).
enum class GradShares { Replicated, Sharded };

// When steps are checked: every step before (or right after) its buckets step, or - on CUDA under
// "stop" without clipping, where a per-step check would drain the stream every step - once per log
// window and before every checkpoint (docs/design.md, "Divergence").
enum class StepCheck { EveryStep, EveryLogWindow };

struct StepVerdict {
  bool finite = true;
  double grad_sum_sq = 0.0;  // global sum of squares of the reduced gradient (before grad_scale)
  // Ranks whose loss of this step (not finite, or above the limit), or whose share of the
  // gradient's sum of squares (not finite) failed, with those values (for the message).
  std::vector<int> loss_ranks, grad_ranks;
  std::vector<double> losses, grad_shares;
  double loss_limit = 0.0;  // train.max_loss, 0: none
};

// Collective over `comm`, every rank of the job (every rank at the same point of the same step):
// all-reduces this rank's step loss and gradient share (2 x world size doubles) and returns the
// same verdict on every rank. grad_sum_sq of a Replicated run is `local_grad_sum_sq` itself; of
// a Sharded one the sum of the shares of ranks 0 .. `share_ranks` - 1 (a shard group holds every
// shard once: the whole world, or with hybrid sharding the first group, whose replicas hold the
// same bits). `local_loss` is the mean over the step's micro-batches; above `loss_limit` (> 0) it
// fails too.
StepVerdict agree_on_step(double local_loss, double local_grad_sum_sq, GradShares shares,
                          int share_ranks, double loss_limit, Communicator& comm);

// "step 7: the loss is not finite on rank 1 (nan); the gradient norm is not finite (inf in the
// buckets of rank 0)" - what was non-finite, where.
std::string describe_nonfinite(const StepVerdict& verdict, std::int64_t step);

// Thrown on every rank together when a step is not finite under train.on_nonfinite = "stop": the
// run ends with exit 1 and writes no checkpoint of the step (runtime/cli/train_command.cpp).
class NonfiniteStop : public RuntimeFailure {
 public:
  using RuntimeFailure::RuntimeFailure;
};

}  // namespace zl
