// The bucket table, each rank's totals and the balance line of `zerolap plan` (plan_report.h).
#include "runtime/train/plan/plan_report.h"

#include <fmt/format.h>

#include "runtime/train/plan/mode_plan.h"

namespace zl {

std::string human_bytes(std::int64_t bytes) {
  constexpr double kKiB = 1024.0, kMiB = 1024 * kKiB, kGiB = 1024 * kMiB, kTiB = 1024 * kGiB;
  const double b = static_cast<double>(bytes);
  if (b >= kTiB) return fmt::format("{:.2f} TiB", b / kTiB);
  if (b >= kGiB) return fmt::format("{:.2f} GiB", b / kGiB);
  if (b >= kMiB) return fmt::format("{:.2f} MiB", b / kMiB);
  if (b >= kKiB) return fmt::format("{:.1f} KiB", b / kKiB);
  return fmt::format("{} B", bytes);
}

std::string format_bucket_table(const BucketPlan& plan, const ParameterStore& store,
                                const ModePlan& mode) {
  std::string out;
  out += fmt::format("{:>6}  {:>10}  {:>12}  {:>11}  {:>8}  {}\n", "bucket", "elements", "bytes",
                     "size", "assigned", "parameters");
  for (const auto& b : plan.buckets) {
    std::string names;
    for (int id : b.param_ids) {
      if (!names.empty()) names += ", ";
      names += store.info(id).name;
    }
    // Element shards: every rank owns one shard of every bucket; ddp: every rank all of it.
    const std::string assigned = mode.element_shards    ? "shards"
                                 : !mode.sharded_state ? "all"
                                                       : fmt::format("{}", b.assigned_rank);
    out += fmt::format("{:>6}  {:>10}  {:>12}  {:>11}  {:>8}  {}\n", b.index, b.numel, b.bytes(),
                       human_bytes(b.bytes()), assigned, names);
  }
  out += fmt::format("\n{} buckets, {} parameters ({} elements, {} with alignment padding)\n",
                     plan.buckets.size(), store.count(), store.parameter_numel(),
                     store.total_numel());
  return out;
}

std::string format_bucket_plan(const BucketPlan& plan, const ParameterStore& store,
                               const ModePlan& mode) {
  std::string out = format_bucket_table(plan, store, mode);
  out += fmt::format("{:>6}  {:>8}  {:>14}  {:>16}\n", "rank", "buckets", "owned elements",
                     "optimizer state");
  // Owned: what a rank steps and keeps optimizer state of: every bucket in ddp, its assigned
  // buckets in zero, or its shard of each (element shards).
  for (int r = 0; r < plan.world_size; ++r) {
    out += fmt::format("{:>6}  {:>8}  {:>14}  {:>16}\n", r, mode.stepped_buckets(plan, r),
                       mode.stepped_numel(plan, r), human_bytes(mode.state_bytes(plan, r)));
  }
  return out + format_step_balance(plan, store, mode);
}

std::string format_step_balance(const BucketPlan& plan, const ParameterStore& store,
                                const ModePlan& mode) {
  const StepBalance balance = step_balance(mode, plan, store);
  return fmt::format(
      "balance: elements each rank steps, largest {} and smallest {} ({} and {} without "
      "padding)\n",
      balance.largest, balance.smallest, balance.largest_parameters, balance.smallest_parameters);
}

}  // namespace zl
