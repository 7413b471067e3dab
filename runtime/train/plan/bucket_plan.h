// The bucket plan: how the flat gradient buffer is cut into buckets and which rank owns each.
//
// Note [Bucket order]: buckets are built walking parameters in flat-layout order (reverse
// registration order = the order backward finalises gradients, see Note [Flat layout]). A bucket
// is a contiguous slice [offset, offset + numel) that never splits a parameter, nor a module. The
// parameters of one module (same name up to the last '.': layers.3.weight and layers.3.bias) are
// registered together, so they are consecutive in the layout, and they become ready at the same
// moment, when that module's backward ends: splitting them would only add a collective. Only
// consecutive parameters are grouped. A new bucket starts when adding the next module would
// exceed the cap (bucket 0 uses first_bucket_cap_mb, so the first collective starts early in
// backward); a module larger than the cap gets a bucket alone. A cut between a layer's weight and
// bias would put a tiny bias in a bucket of its own, whose collective costs a full round of
// synchronisation for a few KiB (docs/bench.md, "What it took to hide communication on 2 cores").
// The plan depends only on the model and the config, so every rank computes the same plan and
// launches bucket collectives in index order.
#pragma once

#include <cstdint>
#include <vector>

#include "models/parameter_store.h"
#include "runtime/config/config.h"

namespace zl {

struct Bucket {
  int index = 0;
  std::int64_t offset = 0;  // first element in the flat buffers
  std::int64_t numel = 0;   // elements including alignment padding
  std::vector<int> param_ids;  // in flat-layout order
  int assigned_rank = 0;       // owns the optimizer state; steps and broadcasts this bucket
  // Backward reads some parameter's value (ParameterInfo::read_in_backward): ZeRO stage 3
  // gathers the bucket in backward only then.
  bool read_in_backward = true;
  std::int64_t bytes() const { return numel * static_cast<std::int64_t>(sizeof(float)); }
};

struct BucketPlan {
  std::vector<Bucket> buckets;
  std::vector<int> bucket_of_param;  // param id -> bucket index
  int world_size = 1;

  // Elements of the buckets assigned to `rank`.
  std::int64_t numel_assigned_to(int rank) const;
  std::int64_t largest_bucket_numel() const;
};

// cap_mb and first_cap_mb in MiB (1024 * 1024 bytes, as PyTorch's bucket_cap_mb).
BucketPlan build_bucket_plan(const ParameterStore& store, double cap_mb, double first_cap_mb,
                             int world_size, AssignmentPolicy assignment);

}  // namespace zl
