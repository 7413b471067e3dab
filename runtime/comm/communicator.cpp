// Communicator-independent accounting (see communicator.h).
#include "runtime/comm/communicator.h"

#include "base/errors.h"

namespace zl {

const char* collective_name(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::AllReduce: return "all_reduce";
    case CollectiveOp::Reduce: return "reduce";
    case CollectiveOp::Broadcast: return "broadcast";
    case CollectiveOp::HostTask: return "host";
  }
  return "?";
}

std::int64_t wire_bytes(CollectiveOp op, std::int64_t payload, int world) {
  if (world <= 1) return 0;
  const double share = static_cast<double>(world - 1) / world;
  switch (op) {
    case CollectiveOp::AllReduce: return static_cast<std::int64_t>(2.0 * share * payload);
    case CollectiveOp::Reduce:
    case CollectiveOp::Broadcast: return static_cast<std::int64_t>(share * payload);
    case CollectiveOp::HostTask: return 0;
  }
  return 0;
}

void check_reduce_op(DType dtype, ReduceOp op, const std::string& comm) {
  ZL_CHECK(dtype == DType::F32 || op == ReduceOp::Sum,
           "communicator {}: ReduceOp::Average on a {} buffer (bf16 reductions are sums; fold "
           "1/world into the consumer's scale)",
           comm, dtype_name(dtype));
}

}  // namespace zl
