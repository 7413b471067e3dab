// LayerTrace: per-layer spans on the "main" trace thread (see layer_trace.h).
#include "runtime/trace/layer_trace.h"

#include <fmt/format.h>

namespace zl {
namespace {

constexpr double kMinWaitUs = 2.0;  // shorter waits are hook overhead, not a broadcast

}  // namespace

LayerTrace::LayerTrace(Tracer& tracer, const ParameterStore& store) : tracer_(tracer) {
  for (const ParameterInfo& p : store.parameters()) {
    const auto dot = p.name.rfind('.');
    layer_of_param_.push_back(dot == std::string::npos ? p.name : p.name.substr(0, dot));
  }
}

ParamUseHook LayerTrace::forward_hook(const ParamUseHook& inner) {
  // `inner` is the Trainer's per-layer wait, which lives as long as the Trainer.
  return [this, &inner](int param_id) { before_param_use(param_id, inner); };
}

void LayerTrace::before_param_use(int param_id, const ParamUseHook& inner) {
  const std::string& layer = layer_of_param_.at(static_cast<std::size_t>(param_id));
  const bool new_layer = layer != open_layer_;
  const double wait_begin = tracer_.now_us();
  if (new_layer && !open_layer_.empty()) {
    tracer_.span(kMainTraceThread, open_layer_, open_begin_us_, wait_begin);
  }
  if (inner) inner(param_id);
  const double wait_end = tracer_.now_us();
  if (wait_end - wait_begin >= kMinWaitUs) {
    tracer_.span(kMainTraceThread, "wait params", wait_begin, wait_end, {{"param", param_id}});
  }
  if (new_layer) {
    open_layer_ = layer;
    open_begin_us_ = wait_end;
  }
}

void LayerTrace::end_forward() {
  if (!open_layer_.empty()) {
    tracer_.span(kMainTraceThread, open_layer_, open_begin_us_, tracer_.now_us());
  }
  open_layer_.clear();
}

void LayerTrace::observe_backward(Tape& tape) {
  tape.on_backward_node = [this](const TapeNode& node, bool begin) {
    if (begin) {
      node_begin_us_ = tracer_.now_us();
      return;
    }
    tracer_.span(kMainTraceThread, fmt::format("{} {}", node.name, node.layer), node_begin_us_,
                 tracer_.now_us(), {{"layer", node.layer}});
  };
}

}  // namespace zl
