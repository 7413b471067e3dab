// Bucket construction and rank assignment (see Note [Bucket order] in bucket_plan.h).
#include "runtime/train/plan/bucket_plan.h"

#include <algorithm>
#include <numeric>
#include <queue>

#include "base/errors.h"

namespace zl {

std::int64_t BucketPlan::numel_assigned_to(int rank) const {
  std::int64_t total = 0;
  for (const auto& b : buckets) {
    if (b.assigned_rank == rank) total += b.numel;
  }
  return total;
}

std::int64_t BucketPlan::largest_bucket_numel() const {
  std::int64_t largest = 0;
  for (const auto& b : buckets) largest = std::max(largest, b.numel);
  return largest;
}

namespace {

// Largest bucket first onto the least-loaded rank (ties: lower rank, then lower bucket index), so
// the per-rank optimizer-state sizes differ by at most one bucket.
void assign_greedy(std::vector<Bucket>& buckets, int world_size) {
  std::vector<int> order(buckets.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return buckets[a].numel > buckets[b].numel; });
  // The least-loaded rank, the lowest on a tie. Every bucket holds at least one element, so a
  // rank without a bucket (load 0) is always least, and the lowest of those is the next one not
  // yet given a bucket; the loaded ones are a heap of (load, rank). O(buckets x log ranks), and
  // nothing per rank: a plan for a huge world (plan --world) stays cheap.
  using Load = std::pair<std::int64_t, int>;
  std::priority_queue<Load, std::vector<Load>, std::greater<>> loaded;
  int next_empty = 0;
  for (int index : order) {
    ZL_CHECK(buckets[index].numel > 0, "bucket {} is empty", index);
    Load least{0, 0};
    if (next_empty < world_size) {
      least.second = next_empty++;
    } else {
      least = loaded.top();
      loaded.pop();
    }
    buckets[index].assigned_rank = least.second;
    loaded.push({least.first + buckets[index].numel, least.second});
  }
}

// True when both names have a module prefix (the name up to the last '.', "layers.3" of
// "layers.3.weight") and it is the same.
bool same_module(const std::string& a, const std::string& b) {
  const auto dot = a.rfind('.');
  return dot != std::string::npos && dot == b.rfind('.') && a.compare(0, dot, b, 0, dot) == 0;
}

}  // namespace

BucketPlan build_bucket_plan(const ParameterStore& store, double cap_mb, double first_cap_mb,
                             int world_size, AssignmentPolicy assignment) {
  ZL_CHECK(store.laid_out(), "bucket plan needs a laid-out parameter store");
  ZL_CHECK(world_size >= 1, "world size {}", world_size);
  ZL_CHECK(cap_mb > 0 && first_cap_mb > 0, "caps {} {}", cap_mb, first_cap_mb);
  constexpr double kMiB = 1024.0 * 1024.0;
  const auto cap_bytes = [&](std::size_t bucket_index) {
    return (bucket_index == 0 ? first_cap_mb : cap_mb) * kMiB;
  };

  BucketPlan plan;
  plan.world_size = world_size;
  plan.bucket_of_param.assign(static_cast<std::size_t>(store.count()), -1);

  const std::vector<int> order = store.ids_in_layout_order();
  Bucket current;
  std::int64_t current_bytes = 0;  // parameter bytes (without padding) decide the cut
  for (std::size_t first = 0; first < order.size();) {
    // [first, last) is one module's parameters (Note [Bucket order]).
    const std::string& name = store.info(order[first]).name;
    std::size_t last = first + 1;
    std::int64_t bytes = store.info(order[first]).numel * static_cast<std::int64_t>(sizeof(float));
    while (last < order.size() && same_module(name, store.info(order[last]).name)) {
      bytes += store.info(order[last]).numel * static_cast<std::int64_t>(sizeof(float));
      ++last;
    }
    if (!current.param_ids.empty() && current_bytes + bytes > cap_bytes(plan.buckets.size())) {
      plan.buckets.push_back(std::move(current));
      current = Bucket{};
      current_bytes = 0;
    }
    for (std::size_t i = first; i < last; ++i) current.param_ids.push_back(order[i]);
    current_bytes += bytes;
    first = last;
  }
  if (!current.param_ids.empty()) plan.buckets.push_back(std::move(current));

  // Offsets and extents from the layout: a bucket runs from its first parameter to the next
  // bucket's first parameter (padding included), the last one to the end of the flat buffer.
  for (std::size_t i = 0; i < plan.buckets.size(); ++i) {
    auto& b = plan.buckets[i];
    b.index = static_cast<int>(i);
    b.offset = store.info(b.param_ids.front()).offset;
    b.read_in_backward = false;
    for (int id : b.param_ids) {
      plan.bucket_of_param[static_cast<std::size_t>(id)] = b.index;
      b.read_in_backward = b.read_in_backward || store.info(id).read_in_backward;
    }
  }
  for (std::size_t i = 0; i < plan.buckets.size(); ++i) {
    const std::int64_t end =
        i + 1 < plan.buckets.size() ? plan.buckets[i + 1].offset : store.total_numel();
    plan.buckets[i].numel = end - plan.buckets[i].offset;
    ZL_CHECK(plan.buckets[i].numel > 0, "bucket {} is empty", i);
  }

  if (assignment == AssignmentPolicy::Greedy) {
    assign_greedy(plan.buckets, world_size);
  } else {
    for (auto& b : plan.buckets) b.assigned_rank = b.index % world_size;
  }
  return plan;
}

}  // namespace zl
