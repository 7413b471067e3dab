// ComputeOnlyCommunicator: a decorator that moves no data. Collectives complete as no-ops in issue
// order on the wrapped communicator's stream, each after the work on its issuing stream as the real
// collective would be (Communicator::no_op), while rank() and size() stay the real world's, so a
// Trainer built on it plans the same buckets, owns the same shards and runs the same forward,
// backward and optimizer work as the real run, minus communication. The bench measures a mode's
// compute time this way (runtime/bench/bench.cpp); parameters then diverge across ranks, so it is
// for timing only.
#pragma once

#include <memory>

#include "runtime/comm/communicator.h"

namespace zl {

class ComputeOnlyCommunicator final : public Communicator {
 public:
  explicit ComputeOnlyCommunicator(std::unique_ptr<Communicator> inner)
      : inner_(std::move(inner)) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  const std::string& name() const override { return inner_->name(); }

  // no_op, not then(): on CUDA a continuation does not wait for the issuing stream, so the
  // interleaved step issued behind it could run during the backward writing its gradients.
  using Communicator::all_reduce;
  using Communicator::broadcast;
  using Communicator::reduce;
  Work all_reduce(void*, std::int64_t, DType, ReduceOp,
                  const ExecContext* issuing_stream = nullptr) override {
    return inner_->no_op(issuing_stream);
  }
  Work reduce(void*, std::int64_t, DType, int, ReduceOp,
              const ExecContext* issuing_stream = nullptr) override {
    return inner_->no_op(issuing_stream);
  }
  Work broadcast(void*, std::int64_t, DType, int,
                 const ExecContext* issuing_stream = nullptr) override {
    return inner_->no_op(issuing_stream);
  }
  // Host data, read by the caller before the call: the real one follows only this communicator's
  // stream, and so does a continuation.
  Work all_reduce_f64(double*, std::int64_t) override {
    return inner_->then([](const ExecContext&) {});
  }
  Work reduce_scatter(void*, std::int64_t, DType, ReduceOp,
                      const ExecContext* issuing_stream = nullptr) override {
    return inner_->no_op(issuing_stream);
  }
  Work all_gather(void*, std::int64_t, DType,
                  const ExecContext* issuing_stream = nullptr) override {
    return inner_->no_op(issuing_stream);
  }
  Work all_gather_from(const void*, void*, std::int64_t, DType,
                       const ExecContext* issuing_stream = nullptr) override {
    return inner_->no_op(issuing_stream);
  }
  Work then(std::function<void(const ExecContext& stream)> fn) override {
    return inner_->then(std::move(fn));
  }
  Work no_op(const ExecContext* issuing_stream = nullptr) override {
    return inner_->no_op(issuing_stream);
  }
  void synchronize() override { inner_->synchronize(); }
  ExecContext exec() const override { return inner_->exec(); }

  CommStats stats() const override { return CommStats{}; }
  void reset_stats() override {}
  void set_tracer(Tracer* tracer) override { inner_->set_tracer(tracer); }

 private:
  std::unique_ptr<Communicator> inner_;
};

}  // namespace zl
