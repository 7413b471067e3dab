// Communicator-independent accounting (see communicator.h).
#include "runtime/comm/communicator.h"

#include "base/errors.h"

namespace zl {

const char* collective_name(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::AllReduce: return "all_reduce";
    case CollectiveOp::Reduce: return "reduce";
    case CollectiveOp::Broadcast: return "broadcast";
    case CollectiveOp::ReduceScatter: return "reduce_scatter";
    case CollectiveOp::AllGather: return "all_gather";
    case CollectiveOp::HostTask: return "host";
  }
  return "?";
}

CollectiveOp collective_op_named(const std::string& name) {
  for (CollectiveOp op : {CollectiveOp::AllReduce, CollectiveOp::Reduce, CollectiveOp::Broadcast,
                          CollectiveOp::ReduceScatter, CollectiveOp::AllGather,
                          CollectiveOp::HostTask}) {
    if (name == collective_name(op)) return op;
  }
  throw InternalError("no collective named '" + name + "'");
}

std::int64_t wire_bytes(CollectiveOp op, std::int64_t payload, int world) {
  if (world <= 1 || op == CollectiveOp::HostTask) return 0;
  const double share = static_cast<double>(world - 1) / world;
  return static_cast<std::int64_t>((op == CollectiveOp::AllReduce ? 2.0 : 1.0) * share * payload);
}

void check_reduce_op(DType dtype, ReduceOp op, const std::string& comm) {
  ZL_CHECK(dtype == DType::F32 || op == ReduceOp::Sum,
           "communicator {}: ReduceOp::Average on a {} buffer (bf16 reductions are sums; fold "
           "1/world into the consumer's scale)",
           comm, dtype_name(dtype));
}

std::int64_t shard_numel(std::int64_t n, int world, const std::string& comm) {
  ZL_CHECK(world >= 1 && n >= 0 && n % world == 0,
           "communicator {}: a sharded collective of {} elements on {} ranks (the buffer must "
           "split into equal shards)",
           comm, n, world);
  return n / world;
}

}  // namespace zl
