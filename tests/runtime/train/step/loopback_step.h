// LoopbackStep: one rank's step parts (runtime/train/step/step_parts.h) for a small MLP on two
// loopback communicators, driven by the calls Trainer::train_step makes (train_step.cpp), the
// tape's hooks played by hand: forward's param-use hook in registration order, backward's read,
// write and grad-ready hooks in flat-layout order. The one file of these tests that builds the
// step's parts: a renamed part or a changed constructor is adapted here.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "models/model.h"
#include "runtime/comm/communicator.h"
#include "runtime/config/mode.h"
#include "runtime/train/plan/bucket_plan.h"
#include "runtime/train/plan/collective_program.h"
#include "runtime/train/plan/mode_plan.h"
#include "runtime/train/plan/shard_layout.h"
#include "runtime/train/step/parameter_gather.h"
#include "runtime/train/step/rank_optimizer.h"
#include "runtime/train/step/step_observer.h"
#include "runtime/train/step/step_options.h"
#include "runtime/train/step/step_parts.h"
#include "tests/runtime/comm/loopback_communicator.h"

namespace zl::test {

// The mode named `name` as Mode::name spells it ("zero2/after_backward/reduce_scatter_allgather").
inline Mode mode_named(std::string_view name) {
  const std::optional<Mode> mode = parse_mode(name);
  REQUIRE(mode);
  return *mode;
}

struct StepSetup {
  Mode mode;  // ddp
  std::int64_t grad_accum = 1;
  int prefetch = 1;
  bool reshard_after_forward = true;
  float clip_grad_norm = 0.0f;
  OnNonfinite on_nonfinite = OnNonfinite::Stop;
  DType reduce_dtype = DType::F32;  // bf16: with bf16 parameters (precision.compute = "bf16")
  // Bucket caps below one layer: one bucket per Linear, of 64 (layers.2), 272 (layers.1) and 80
  // (layers.0) elements - distinct sizes, by which a test tells the buckets' collectives apart.
  std::vector<std::int64_t> widths = {4, 16, 16, 3};
};

// The events of StepObserver, as (kind, bucket), in the order they happened (any thread).
class EventLog final : public StepObserver {
 public:
  void on_step_event(const StepEvent& event) override {
    std::lock_guard lock(mutex_);
    events_.push_back(event);
  }
  std::vector<StepEvent> events() const {
    std::lock_guard lock(mutex_);
    return events_;
  }
  // The buckets of events of `kind`, in order.
  std::vector<int> buckets(StepEvent::Kind kind) const {
    std::vector<int> out;
    for (const StepEvent& e : events()) {
      if (e.kind == kind) out.push_back(e.bucket);
    }
    return out;
  }
  // Position of the first event (kind, bucket); -1 if none.
  int index_of(StepEvent::Kind kind, int bucket) const {
    const std::vector<StepEvent> all = events();
    for (std::size_t i = 0; i < all.size(); ++i) {
      if (all[i].kind == kind && all[i].bucket == bucket) return static_cast<int>(i);
    }
    return -1;
  }
  void clear() {
    std::lock_guard lock(mutex_);
    events_.clear();
  }

 private:
  mutable std::mutex mutex_;
  std::vector<StepEvent> events_;
};

// A gradient value for element i of parameter id in a micro-batch of a step (small, exact in
// fp32 sums, distinct per micro-batch).
inline float test_gradient(int id, std::int64_t i, std::int64_t micro, std::int64_t step) {
  return 0.001f * static_cast<float>((i * 7 + id * 13 + micro * 5 + step * 3) % 17) - 0.008f;
}

class LoopbackStep {
 public:
  explicit LoopbackStep(const StepSetup& s)
      : setup(s),
        reduce_comm("comm.reduce", log),
        broadcast_comm("comm.broadcast", log),
        mode(make_mode(s)),
        planned(plan_layout(spec(s, mode), parallel(s), mode, 1)),
        model(spec(s, mode), DeviceKind::Cpu, planned.padding,
              mode.mode.stage >= 2 ? GradientStorage::Bound : GradientStorage::Flat,
              mode.gathers_parameters() ? ParamStorage::Gathered : ParamStorage::Flat),
        store(model.store()),
        plan(build_bucket_plan(store, 1e-7, 1e-7, 1, AssignmentPolicy::RoundRobin)),
        initial(model.initial_parameters()),
        shards(mode.gathers_parameters()
                   ? std::make_unique<ParameterShards>(mode, plan, store, 0,
                                                       model.initial_values())
                   : nullptr),
        optimizer(OptimizerConfig{}, plan, store, 0, mode, 1000, model.initial_values(),
                  shards.get()),
        options{.clip_grad_norm = s.clip_grad_norm,
                .grad_accum = s.grad_accum,
                .on_nonfinite = s.on_nonfinite},
        parts(mode, options, plan, store, optimizer, StepComms{reduce_comm, broadcast_comm},
              ExecContext{}, nullptr, shards.get()) {
    parts.set_observer(&events);
    for (const Bucket& b : plan.buckets) {
      REQUIRE(bucket_of_numel_.count(b.numel) == 0);  // the sizes tell buckets apart
      bucket_of_numel_[b.numel] = b.index;
    }
  }
  ~LoopbackStep() {
    try {
      parts.synchronize();
    } catch (...) {
    }
  }

  int buckets() const { return static_cast<int>(plan.buckets.size()); }
  int bucket_of(const LoggedCollective& c) const { return bucket_of_numel_.at(c.n); }
  // "<op> <bucket>" for each logged collective on `comm` ("comm.reduce", "comm.broadcast"), in
  // issue order ("all_reduce 0", "all_gather_from 3"); an "all_reduce_f64" (a verdict's; none at
  // one rank) alone.
  std::vector<std::string> issued(const std::string& comm) const {
    std::vector<std::string> out;
    for (const LoggedCollective& c : log.entries()) {
      if (c.comm != comm) continue;
      out.push_back(c.op == "all_reduce_f64" ? c.op : c.op + " " + std::to_string(bucket_of(c)));
    }
    return out;
  }

  // --- the hooks and calls of one step, as Trainer::train_step makes them ---------------------
  // Forward's param-use hook for every parameter, in registration order.
  void forward() {
    for (int id = 0; id < store.count(); ++id) forward_read(id);
  }
  void forward_read(int id) {
    if (mode.gathers_parameters()) {
      parts.gather().before_forward_read(id);
    } else {
      parts.buckets.wait_for_bucket(plan.bucket_of_param[static_cast<std::size_t>(id)]);
    }
  }
  // The step's scalars are fixed before its final backward.
  void begin_backward(MicroBatch micro) {
    if (micro.last()) scalars = optimizer.next_step(1.0f / static_cast<float>(micro.count));
    parts.reducer.begin_backward(micro);
    accumulate_ = parts.reducer.backward_accumulate(micro);
    micro_ = micro;
  }
  // Backward's hooks for parameter `id`: its read (stage 3), the gradient write (stage 2's pool)
  // of test_gradient values, then its grad-ready hook and the collectives it completes.
  void backward_param(int id) {
    const ParameterInfo& p = store.info(id);
    if (mode.gathers_parameters() && p.read_in_backward) parts.gather().before_backward_read(id);
    if (mode.pools_gradients()) parts.gradients.pool().before_grad_write(id, compute());
    float* g = store.param_grad(id);
    for (std::int64_t i = 0; i < p.numel; ++i) {
      const float v = nan_param_ == id && i == 0 ? std::nanf("")
                                                 : test_gradient(id, i, micro_.index, step_);
      g[i] = accumulate_ == Accumulate::Overwrite ? v : g[i] + v;
    }
    gradient_ready(id);
  }
  void gradient_ready(int id) {
    parts.reducer.gradient_ready(id);
    while (const std::optional<int> bucket = parts.reducer.start_next_collective()) {
      if (parts.reducer.in_final_backward()) {
        parts.schedule->after_collective_started(*bucket, scalars);
      }
    }
  }
  void end_backward() {
    if (mode.gathers_parameters()) {
      if (micro_.last()) {
        parts.gather().release_all();
      } else {
        parts.gather().release_for_next_micro_batch();
      }
    }
    parts.reducer.end_backward();
  }
  // Every parameter in flat-layout order (the order backward finalises them).
  void backward(MicroBatch micro) {
    begin_backward(micro);
    for (int id : store.ids_in_layout_order()) backward_param(id);
    end_backward();
  }
  // The schedule after the final backward; the step's number (test_gradient) moves on.
  StepVerdict after_backward() {
    const StepVerdict verdict = parts.schedule->after_backward(scalars, [] { return 1.0; });
    ++step_;
    return verdict;
  }
  // One whole step: every micro-batch's forward and backward, then the schedule.
  StepVerdict step() {
    for (std::int64_t m = 0; m < setup.grad_accum; ++m) {
      forward();
      backward(MicroBatch{.index = m, .count = setup.grad_accum});
    }
    return after_backward();
  }
  // The next backward writes NaN into parameter id's first gradient element (-1: none).
  void poison_gradient(int id) { nan_param_ = id; }
  void synchronize() { parts.synchronize(); }
  const ExecContext& compute() const { return parts.context.compute; }

  // The whole flat layout of the fp32 parameters (host).
  std::vector<float> parameters() {
    synchronize();
    if (mode.gathers_parameters()) return parts.gather().full_parameters();
    return std::vector<float>(store.data(), store.data() + store.total_numel());
  }

  StepSetup setup;
  CollectiveLog log;
  LoopbackCommunicator reduce_comm;
  LoopbackCommunicator broadcast_comm;
  ModePlan mode;
  PlannedLayout planned;
  Model model;
  ParameterStore& store;
  BucketPlan plan;
  std::vector<float> initial;
  std::unique_ptr<ParameterShards> shards;  // stage 3 only
  RankOptimizer optimizer;
  StepOptions options;
  StepParts parts;
  EventLog events;
  StepScalars scalars;

 private:
  static ModelSpec spec(const StepSetup& s, const ModePlan& mode) {
    ModelSpec spec;
    spec.widths = s.widths;
    spec.seed = 3;
    spec.dtype = mode.param_dtype;
    return spec;
  }
  static ParallelConfig parallel(const StepSetup& s) {
    ParallelConfig p;
    set_mode(p, s.mode);
    p.prefetch = s.prefetch;
    p.reshard_after_forward = s.reshard_after_forward;
    p.bucket_cap_mb = 1e-7;
    p.first_bucket_cap_mb = 1e-7;
    return p;
  }
  static ModePlan make_mode(const StepSetup& s) {
    PrecisionConfig precision;  // bf16 gradient collectives go with bf16 parameters
    if (s.reduce_dtype == DType::BF16) precision.compute = ComputePrecision::Bf16;
    precision.reduce_dtype = s.reduce_dtype;
    ModePlan m = make_mode_plan(parallel(s), OptimizerConfig{}, precision);
    m.micro_batches = static_cast<int>(s.grad_accum);
    return m;
  }

  std::map<std::int64_t, int> bucket_of_numel_;
  Accumulate accumulate_ = Accumulate::Overwrite;
  MicroBatch micro_;
  std::int64_t step_ = 0;
  int nan_param_ = -1;
};

}  // namespace zl::test
