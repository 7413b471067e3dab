// StepVerdict: one finiteness answer per step, identical on every rank (see step_verdict.h).
//
// Note [Step verdict]: a step is non-finite when its training loss on any rank, or the global norm
// of its reduced gradient, is NaN or infinite. The norm's sum of squares accumulates in double, and
// the largest float squared (about 1.2e77) is far inside double's range, so the sum is finite
// exactly when every gradient element is: the check is exact, not a heuristic. A large finite loss
// is not divergence by default (Adam moves each parameter by about lr per step whatever the
// gradient, so a huge lr grows the loss without a NaN, and no one bound suits every loss):
// train.max_loss opts in. Each rank puts its loss in slot r and its gradient share in slot
// world + r of one all-reduce of 2 x world doubles; the others add 0, and x + 0 is x bit for bit
// (NaN and inf included), so every rank reads every rank's values, reaches the same verdict and
// can name the ranks. It is the all-reduce clipping needed anyway. The loss is folded in because a
// rank's loss can be non-finite while the reduced gradient is finite (an overflowed log-sum-exp).
// A skip (Megatron-LM's skipped iterations) consumes the step's micro-batches and counts as a step
// of the run, but the optimizer's step count t, and so Adam's bias correction, SGD momentum's
// first step and the LR schedule, do not advance; a checkpoint after a skip has
// optimizer_step < step. A stop needs no pre-step verdict, only one before anything is written; a
// skip does, which is why interleaved (stepping each bucket as its reduction completes) cannot
// skip, nor clip. On CUDA the verdict drains the stream, so under "stop" without clipping or
// max_loss the check runs once per log window on the window's loss and the parameters' sum of
// squares (a non-finite gradient makes the parameters non-finite in the same step), and again
// before every checkpoint.
#include "runtime/train/step/step_verdict.h"

#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace zl {

StepVerdict agree_on_step(double local_loss, double local_grad_sum_sq, GradShares shares,
                          int share_ranks, double loss_limit, Communicator& comm) {
  const int world = comm.size();
  const auto w = static_cast<std::size_t>(world);
  std::vector<double> slots(2 * w, 0.0);
  slots[static_cast<std::size_t>(comm.rank())] = local_loss;
  slots[w + static_cast<std::size_t>(comm.rank())] = local_grad_sum_sq;
  if (world > 1) comm.all_reduce_f64(slots.data(), static_cast<std::int64_t>(slots.size())).wait();

  StepVerdict v;
  v.loss_limit = loss_limit;
  double sharded_sum = 0.0;
  for (int r = 0; r < world; ++r) {
    const double loss = slots[static_cast<std::size_t>(r)];
    const double share = slots[w + static_cast<std::size_t>(r)];
    if (!std::isfinite(loss) || (loss_limit > 0.0 && loss > loss_limit)) {
      v.loss_ranks.push_back(r);
      v.losses.push_back(loss);
    }
    if (!std::isfinite(share)) {
      v.grad_ranks.push_back(r);
      v.grad_shares.push_back(share);
    }
    if (r < share_ranks) sharded_sum += share;  // in rank order: the same sum on every rank
  }
  v.grad_sum_sq = shares == GradShares::Sharded ? sharded_sum : local_grad_sum_sq;
  v.finite = v.loss_ranks.empty() && v.grad_ranks.empty();
  return v;
}

std::string describe_nonfinite(const StepVerdict& v, std::int64_t step) {
  std::vector<std::string> parts, nonfinite, too_large;
  for (std::size_t i = 0; i < v.loss_ranks.size(); ++i) {
    const std::string where = fmt::format("{:.4g} on rank {}", v.losses[i], v.loss_ranks[i]);
    (std::isfinite(v.losses[i]) ? too_large : nonfinite).push_back(where);
  }
  if (!nonfinite.empty()) {
    parts.push_back(
        fmt::format("the training loss is not finite ({})", fmt::join(nonfinite, ", ")));
  }
  if (!too_large.empty()) {
    parts.push_back(fmt::format("the training loss is above train.max_loss = {:.4g} ({})",
                                v.loss_limit, fmt::join(too_large, ", ")));
  }
  if (!v.grad_ranks.empty()) {
    parts.push_back(fmt::format("the gradient norm is not finite ({} in the reduced gradient "
                                "held by rank{} {})",
                                v.grad_shares.front(), v.grad_ranks.size() == 1 ? "" : "s",
                                fmt::join(v.grad_ranks, ", ")));
  }
  return fmt::format("step {}: {}", step, fmt::join(parts, "; "));
}

}  // namespace zl
