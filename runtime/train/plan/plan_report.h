// What `zerolap plan` prints of a bucket plan - the bucket table, each rank's totals and the step
// balance line - and human_bytes, the byte sizes every plan and memory message prints.
#pragma once

#include <cstdint>
#include <string>

#include "models/parameter_store.h"
#include "runtime/train/plan/bucket_plan.h"

namespace zl {

struct ModePlan;

// The bucket table of `zerolap plan`: one row per bucket, then totals per rank (elements, gradient
// bytes, optimizer-state bytes as `mode` allocates them) and the balance line.
std::string format_bucket_plan(const BucketPlan& plan, const ParameterStore& store,
                               const ModePlan& mode);
// Its first part alone: one row per bucket and the totals line (no per-rank rows).
std::string format_bucket_table(const BucketPlan& plan, const ParameterStore& store,
                                const ModePlan& mode);
// Its last line alone: the largest and smallest element counts a rank steps (step_balance).
std::string format_step_balance(const BucketPlan& plan, const ParameterStore& store,
                                const ModePlan& mode);
// A size for people: "512 B", "1.5 KiB", "12.25 MiB", "3.00 GiB", "1.20 TiB".
std::string human_bytes(std::int64_t bytes);

}  // namespace zl
