// One training step of one rank, top to bottom: forward with its per-layer waits, backward with
// the reducer starting each bucket's collective, the mode's schedule stepping and broadcasting
// each bucket, and the step's verdict. The primitives are reducer.h (collectives), bucket_ops.h
// (step, broadcast, per-layer wait) and schedule.h (when, per mode).
//
// One zero/interleaved step with four buckets, as the three streams run it. b0 holds the last
// layers (backward finishes their gradients first), b3 the first layers. R = the bucket's
// gradient collective (all-reduce or reduce), S = its optimizer step on the rank it is assigned
// to, C = its broadcast from that rank, F = forward of a bucket's layers, B = their backward.
// Time runs to the right; an arrow is "starts after".
//
//              forward                    backward (the final micro-batch)          after backward
//   compute    F3 F2 F1 F0 loss  B0 ───────── B1 ───────── B2 ───────── B3 ───────── verdict
//                                  │           │            │            │
//                                  ▼           ▼            ▼            ▼
//   reduce                         R0 ─ S0     R1 ─ S1      R2           R3 ─ S3 ─ S2
//                                        │           │                         │    │
//                                        ▼           ▼                         ▼    ▼
//   broadcast                            C0          C1                        C3   C2
//
//   next step  F3 waits for C3, F2 for C2, F1 for C1, F0 for C0 (BucketOps::wait_for_bucket)
//
// Each R, S and C is one operation on its communicator's stream, issued in the same order on
// every rank (Note [Two communicators]). The tail - S3, C3 before S2, C2 - is Note [Tail
// broadcast order]. The other schedules run S and C after B3, on the compute stream
// (schedule.h). With element shards (reduce_scatter_allgather) R is a reduce-scatter, every rank
// runs S on its shard and C is an all-gather. ZeRO stage 3 has no C: a gather of bucket b, issued
// from the compute stream `parallel.prefetch` buckets ahead, precedes Fb and Bb instead, and
// reads the shard S wrote (param_use_hook_ and backward_read_hook_; Note [Parameter gathers]).
#include "runtime/train/run/trainer.h"

#include <cstdio>
#include <limits>

#include <fmt/format.h>

#include "base/clock.h"
#include "base/fault_stop.h"

namespace zl {
namespace {

// A step's micro-batches come from one epoch (Note [Epochs and accumulation]): fewer than
// grad_accum left in it are skipped. After a step, so that the epoch a run reports is done when
// its last step is; before one too, for a position resumed from another global batch.
void skip_epoch_tail(std::int64_t& cursor, std::int64_t per_epoch, std::int64_t grad_accum) {
  const std::int64_t left_in_epoch = per_epoch - cursor % per_epoch;
  if (left_in_epoch < grad_accum) cursor += left_in_epoch;
}

}  // namespace

void Trainer::train_step() {
  const std::int64_t step = position_.step + 1;
  const std::int64_t grad_accum = step_options_.grad_accum;
  const std::int64_t per_epoch = setup_.sampler->batches_per_epoch();
  skip_epoch_tail(position_.cursor, per_epoch, grad_accum);

  for (std::int64_t micro = 0; micro < grad_accum; ++micro) {
    // 1. Forward and loss on this rank's share of the next global batch. Before a layer reads
    //    its parameters, it waits for its bucket's broadcast of the previous step
    //    (after_backward, interleaved: param_use_hook_), or at stage 3 for its gather.
    setup_.sampler->batch_indices(position_.cursor / per_epoch, position_.cursor % per_epoch,
                                  world_.rank, indices_);
    ++position_.cursor;
    {
      TraceSpan span(&tracer_, kMainTraceThread, "forward",
                     {{"step", step}, {"micro_batch", micro}});
      TimelineScope timed(&tracer_.timeline(), setup_.compute, "compute", "forward");
      forward_micro_batch(step);
    }

    // 2. Backward. Earlier micro-batches only accumulate gradients. In the final one, the reducer
    //    starts each bucket's collective once its gradients are final, and the schedule follows
    //    it at once (gradient_ready below; interleaved queues the bucket's step and broadcast
    //    behind its collective).
    //    Stage 2 reduce-scatters every micro-batch into the rank's gradient shard instead
    //    (Note [Gradient pool]).
    const MicroBatch batch{.index = micro, .count = grad_accum};
    if (batch.last()) {
      // Gradients hold the sum over ranks and micro-batches of per-micro-batch mean gradients:
      // averaging (docs/design.md invariant 6) is folded into the fused step as grad_scale.
      const auto ranks = static_cast<std::int64_t>(setup_.comms().every_rank().size());
      scalars_ = optimizer_->next_step(1.0f / static_cast<float>(ranks * grad_accum));
    }
    parts_->reducer.begin_backward(batch);
    {
      TraceSpan span(&tracer_, kMainTraceThread, "backward",
                     {{"step", step}, {"micro_batch", micro}});
      TimelineScope timed(&tracer_.timeline(), setup_.compute, "compute", "backward");
      tape_.backward(BackwardContext{
          .accumulate = parts_->reducer.backward_accumulate(batch),
          .on_grad_ready = &grad_ready_hook_,
          .before_read = &backward_read_hook_,
          .on_grad_write = &grad_write_hook_,
      });
      // Stage 3: the gather buffers go back and the next forward gathers again, except, between
      // micro-batches, the bucket it reads first (Note [Parameter gathers]).
      if (setup_.mode.gathers_parameters()) {
        if (batch.last()) {
          parts_->gather().release_all();
        } else {
          parts_->gather().release_for_next_micro_batch();
        }
      }
    }
    parts_->reducer.end_backward();
  }

  // 3. After backward: the schedule steps and broadcasts what backward did not, and every rank
  //    reaches the same verdict on the step (docs/design.md, "Divergence").
  const auto start = Clock::now();
  StepVerdict verdict;
  {
    TraceSpan span(&tracer_, kMainTraceThread, "finish_backward", {{"step", step}});
    verdict = parts_->schedule->after_backward(scalars_,
                                               [this] { return loss_window_.step_loss(); });
  }
  if (phase_observer_) phase_observer_->on_after_backward(seconds_since(start));

  // 4. A step that is not finite stops the run, or is skipped: every rank left its parameters and
  //    optimizer state as they were, and the optimizer's step count goes back, so the skip leaves
  //    no trace in t or the LR schedule. The step still consumed its data.
  if (!verdict.finite && step_options_.on_nonfinite == OnNonfinite::Stop) {
    throw NonfiniteStop(fmt::format(
        "diverged at {}; train.on_nonfinite = \"stop\" ends the run here, and no checkpoint of "
        "this step or later is written (lower optimizer.lr, set train.clip_grad_norm, or set "
        "train.on_nonfinite = \"skip_step\" to skip such steps)",
        describe_nonfinite(verdict, step)));
  }
  if (!verdict.finite) {
    optimizer_->set_step_count(scalars_.t - 1);
    ++skipped_steps_;
    if (world_.is_root() && !options_.quiet) {
      fmt::print("zerolap: skipped {} (train.on_nonfinite = \"skip_step\"; {} skipped so far)\n",
                 describe_nonfinite(verdict, step), skipped_steps_);
      std::fflush(stdout);
    }
  }
  loss_window_.end_step(verdict.finite ? StepCount::Counted : StepCount::Skipped);
  ++position_.step;
  skip_epoch_tail(position_.cursor, per_epoch, grad_accum);
}

// The grad-ready hook of a reducing backward: each bucket whose gradients are now all final gets
// its collective, in bucket order, and in the step's final backward right after it the
// schedule's part for that bucket.
void Trainer::gradient_ready(int param_id) {
  parts_->reducer.gradient_ready(param_id);
  while (const std::optional<int> bucket = parts_->reducer.start_next_collective()) {
    if (parts_->reducer.in_final_backward()) {
      parts_->schedule->after_collective_started(*bucket, scalars_);
    }
  }
}

// Forward and loss of the micro-batch indices_ names; the loss's gradient goes where backward
// starts.
void Trainer::forward_micro_batch(std::int64_t step) {
  const Dataset& train = setup_.data.train;
  batches_.gather(train, indices_);
  if (!indices_.empty() && fault_nonfinite_input(step, world_.rank)) {
    batches_.host_inputs()[0] = std::numeric_limits<float>::quiet_NaN();  // base/fault_stop.h
  }
  tape_.reset();
  const DeviceBatch in = batches_.upload(train.task);
  const Tensor x{in.x, static_cast<std::int64_t>(indices_.size()), train.feature_dim,
                 setup_.compute.device};
  const ForwardResult out =
      setup_.model->forward(tape_, x, layer_trace_ ? traced_param_use_hook_ : param_use_hook_);
  if (layer_trace_) layer_trace_->end_forward();
  if (train.task == TaskKind::Classification) {
    loss_window_.add_classification(out.output, in.labels, out.grad_output);
  } else {
    loss_window_.add_regression(out.output, in.targets, out.grad_output);
  }
}

}  // namespace zl
