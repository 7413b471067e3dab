// autograd-lite: a Tape records the forward as a list of nodes, each with a backward closure, and
// owns the activation memory (an arena reused from step to step: no allocation after the first
// step of a given batch size). backward() runs the nodes in reverse.
//
// Note [Grad-ready hook]: backward calls on_grad_ready(param id) for every parameter exactly once,
// right after the node that owns the parameter has finished its *whole* backward — its gradient is
// final and the node no longer reads the parameter's value. The Reducer launches a bucket's
// collective from this hook, and in interleaved ZeRO the bucket's parameters may be overwritten by
// the optimizer while backward continues on earlier layers. Before a node first writes a
// parameter's gradient it calls on_grad_write(param id): ZeRO stage 2 hands the parameter's bucket
// a pool buffer there, waiting if every buffer is still being reduce-scattered
// (runtime/train/step/gradient_pool.h).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "base/device_buffer.h"
#include "base/exec_context.h"
#include "models/tensor.h"

namespace zl {

using GradReadyHook = std::function<void(int param_id)>;
// Called before a node writes (or adds to) a parameter's gradient; blocks (or, on CUDA, orders the
// compute stream) until that gradient's memory may be written. Empty: no waiting.
using GradWriteHook = std::function<void(int param_id)>;
// Called before a layer reads a parameter in forward; blocks until its value is current (the
// broadcast of its bucket has landed). Empty: no waiting.
using ParamUseHook = std::function<void(int param_id)>;

struct BackwardContext {
  Accumulate accumulate = Accumulate::Overwrite;  // parameter gradients: = or +=
  const GradReadyHook* on_grad_ready = nullptr;
  // Called with TapeNode::reads_param before a node that reads a parameter runs (ZeRO stage 3
  // gathers the parameter's bucket there). Empty: no call.
  const ParamUseHook* before_read = nullptr;
  const GradWriteHook* on_grad_write = nullptr;
  void grad_ready(int param_id) const {
    if (on_grad_ready && *on_grad_ready) (*on_grad_ready)(param_id);
  }
  void before_grad_write(int param_id) const {
    if (on_grad_write && *on_grad_write) (*on_grad_write)(param_id);
  }
};

struct TapeNode {
  const char* name = "";  // for traces: "linear", "layernorm", ...
  int layer = -1;         // model layer index, for traces
  // Reads the node's saved inputs and d(output); writes d(input) and parameter gradients, then
  // reports its parameters through ctx.grad_ready. Empty: no work (the node only marks its place
  // for traces, e.g. a residual add whose gradient slots alias).
  std::function<void(const BackwardContext& ctx)> backward;
  // The parameter this backward reads (-1: none): a layer's backward reads at most one, the weight
  // d(input) needs (Linear's W, LayerNorm's gamma).
  int reads_param = -1;
};

class Tape {
 public:
  explicit Tape(ExecContext exec = {}) : exec_(exec) {}

  const ExecContext& exec() const { return exec_; }

  // Forgets the recorded nodes; keeps the arena for the next step.
  void reset();

  // A (rows, cols) tensor of `dtype` from the arena, valid until the next reset(). Contents
  // unspecified. Every tensor starts on a 64-byte boundary, whatever its dtype.
  Tensor alloc(std::int64_t rows, std::int64_t cols, DType dtype = DType::F32);

  void record(TapeNode node) { nodes_.push_back(std::move(node)); }
  std::size_t size() const { return nodes_.size(); }

  // Runs every recorded node in reverse. The caller has already written d(loss)/d(output) into
  // ForwardResult::grad_output (see models/model.h).
  void backward(const BackwardContext& ctx);

  // Optional observer for traces: called around each node's backward (begin = true, then false).
  std::function<void(const TapeNode&, bool begin)> on_backward_node;

 private:
  ExecContext exec_;
  std::vector<TapeNode> nodes_;
  std::vector<DeviceBuffer> arena_;  // chunks; never shrinks
  std::size_t arena_chunk_ = 0;      // chunk currently being filled
  std::int64_t arena_used_ = 0;      // bytes used in that chunk
};

}  // namespace zl
