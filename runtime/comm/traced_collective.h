// traced_collective: issues a collective through `issue` and, when tracing, brackets it on the
// communicator's stream with host tasks that record a span named for the bucket ("bucket 3
// all_reduce", args bucket / op / bytes) on the stream's trace thread. The span covers what the
// bucket's collective really occupied on the stream (queueing behind earlier work excluded),
// and encloses the communicator's own span of the same operation. Like the link model, the
// timing assumes continuations run after the work before them (CPU); on CUDA they run at issue
// time (communicator.h), so there the span is the host's enqueue time, not the collective's.
#pragma once

#include <memory>

#include <fmt/format.h>

#include "runtime/comm/communicator.h"
#include "base/tracer.h"

namespace zl {

template <typename Issue>
Work traced_collective(Communicator& comm, Tracer* tracer, int bucket, const char* op,
                       std::int64_t bytes, Issue&& issue) {
  if (!tracer || !tracer->enabled()) return issue();
  auto begin_us = std::make_shared<double>(0.0);
  comm.then([tracer, begin_us](const ExecContext&) { *begin_us = tracer->now_us(); });
  issue();
  // The caller waits for the span's task, not the bare collective: whatever it does next (an
  // optimizer step) then starts after the span ends, as the collective really did.
  return comm.then([tracer, begin_us, &comm, bucket, op, bytes](const ExecContext&) {
    tracer->span(comm.name(), fmt::format("bucket {} {}", bucket, op), *begin_us, tracer->now_us(),
                 {{"bucket", bucket}, {"op", op}, {"bytes", bytes}});
  });
}

}  // namespace zl
