// The link.ranks timing study of element shards (labelled simulated): a job of W real ranks runs
// as W of the N = link.ranks ranks it models. This decorator reports size() N, so the layout, the
// bucket plan and the step are an N-rank job's - rank r owns shard r of N of every bucket, its
// state, masters and step are 1/N of the model - and it runs the sharded collectives on the
// first W shards only, the ones real ranks own: a reduce-scatter or all-gather of n elements is
// the inner W-rank one of W * n / N elements in place. The other collectives pass through. The
// shards W..N-1 belong to nobody: they keep their initial values, so the parameters are not
// trained (the study writes no checkpoints: check_trainable, runtime/train/run/trainer_setup.h).
// The link model (simulated_link.h) wraps this decorator and times every collective at its whole
// n for N ranks.
#pragma once

#include <atomic>
#include <memory>

#include "base/errors.h"
#include "runtime/comm/communicator.h"

namespace zl {

class ShardStudyCommunicator final : public Communicator {
 public:
  // `inner`: the W real ranks; `ranks`: N > W.
  ShardStudyCommunicator(std::unique_ptr<Communicator> inner, int ranks)
      : inner_(std::move(inner)), ranks_(ranks) {
    ZL_CHECK(ranks_ > inner_->size(), "a shard study of {} ranks on {}", ranks_, inner_->size());
  }

  int rank() const override { return inner_->rank(); }
  int size() const override { return ranks_; }
  const std::string& name() const override { return inner_->name(); }

  using Communicator::all_reduce;
  using Communicator::broadcast;
  using Communicator::reduce;
  Work all_reduce(void* buf, std::int64_t n, DType dtype, ReduceOp op,
                  const ExecContext* issuing_stream = nullptr) override {
    return inner_->all_reduce(buf, n, dtype, op, issuing_stream);
  }
  Work reduce(void* buf, std::int64_t n, DType dtype, int root, ReduceOp op,
              const ExecContext* issuing_stream = nullptr) override {
    return inner_->reduce(buf, n, dtype, root, op, issuing_stream);
  }
  Work broadcast(void* buf, std::int64_t n, DType dtype, int root,
                 const ExecContext* issuing_stream = nullptr) override {
    return inner_->broadcast(buf, n, dtype, root, issuing_stream);
  }
  Work reduce_scatter(void* buf, std::int64_t n, DType dtype, ReduceOp op,
                      const ExecContext* issuing_stream = nullptr) override {
    return inner_->reduce_scatter(buf, real_part(n, dtype), dtype, op, issuing_stream);
  }
  Work all_gather(void* buf, std::int64_t n, DType dtype,
                  const ExecContext* issuing_stream = nullptr) override {
    return inner_->all_gather(buf, real_part(n, dtype), dtype, issuing_stream);
  }
  Work all_gather_from(const void* shard, void* buf, std::int64_t n, DType dtype,
                       const ExecContext* issuing_stream = nullptr) override {
    return inner_->all_gather_from(shard, buf, real_part(n, dtype), dtype, issuing_stream);
  }
  Work all_reduce_f64(double* buf, std::int64_t n) override {
    return inner_->all_reduce_f64(buf, n);
  }
  Work then(std::function<void(const ExecContext& stream)> fn) override {
    return inner_->then(std::move(fn));
  }
  Work no_op(const ExecContext* issuing_stream = nullptr) override {
    return inner_->no_op(issuing_stream);
  }
  void synchronize() override { inner_->synchronize(); }
  ExecContext exec() const override { return inner_->exec(); }
  // The inner counts, with each sharded collective's payload its whole n (as the link times it).
  CommStats stats() const override {
    CommStats s = inner_->stats();
    s.payload_bytes += unsent_bytes_.load();
    return s;
  }
  void reset_stats() override {
    inner_->reset_stats();
    unsent_bytes_ = 0;
  }
  void set_tracer(Tracer* tracer) override { inner_->set_tracer(tracer); }
  // Not on the stream: the link model must see each collective's whole n, so it wraps this
  // decorator in host tasks (simulated_link.h). That is the CPU's link model; on CUDA the study
  // is refused at start-up (check_trainable, trainer_setup.h).

 private:
  // The real ranks' elements of a sharded collective of n: W shards of n / N.
  std::int64_t real_part(std::int64_t n, DType dtype) {
    const std::int64_t part = shard_numel(n, ranks_, name()) * inner_->size();
    unsent_bytes_ += (n - part) * dtype_size(dtype);
    return part;
  }

  std::unique_ptr<Communicator> inner_;
  int ranks_;
  std::atomic<std::int64_t> unsent_bytes_{0};  // n minus the real part, summed
};

}  // namespace zl
