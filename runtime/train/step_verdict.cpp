// StepVerdict: one finiteness answer per step, identical on every rank (see step_verdict.h).
#include "runtime/train/step_verdict.h"

#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace zl {

StepVerdict agree_on_step(double local_loss, double local_grad_sum_sq, GradShares shares,
                          double loss_limit, Communicator& comm) {
  const int world = comm.size();
  const auto w = static_cast<std::size_t>(world);
  // Slot r holds rank r's loss and slot world + r its gradient share; every other rank adds 0, and
  // x + 0 is x bit for bit (nan and inf included), so every rank reads back the values themselves.
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
    sharded_sum += share;  // in rank order: the same sum on every rank
  }
  v.grad_sum_sq = shares == GradShares::Sharded ? sharded_sum : local_grad_sum_sq;
  v.finite = v.loss_ranks.empty() && v.grad_ranks.empty();
  return v;
}

std::string describe_nonfinite(const StepVerdict& v, std::int64_t step) {
  std::vector<std::string> parts;
  std::vector<std::string> nonfinite, too_large;
  for (std::size_t i = 0; i < v.loss_ranks.size(); ++i) {
    const std::string where = fmt::format("{:.4g} on rank {}", v.losses[i], v.loss_ranks[i]);
    (std::isfinite(v.losses[i]) ? too_large : nonfinite).push_back(where);
  }
  if (!nonfinite.empty()) {
    parts.push_back(fmt::format("the training loss is not finite ({})", fmt::join(nonfinite, ", ")));
  }
  if (!too_large.empty()) {
    parts.push_back(fmt::format("the training loss is above train.max_loss = {:.4g} ({})",
                                v.loss_limit, fmt::join(too_large, ", ")));
  }
  if (!v.grad_ranks.empty()) {
    std::vector<std::string> where;
    for (const int r : v.grad_ranks) where.push_back(fmt::format("{}", r));
    parts.push_back(fmt::format("the gradient norm is not finite ({} in the reduced gradient "
                                "held by rank{} {})",
                                v.grad_shares.front(), v.grad_ranks.size() == 1 ? "" : "s",
                                fmt::join(where, ", ")));
  }
  return fmt::format("step {}: {}", step, fmt::join(parts, "; "));
}

}  // namespace zl
