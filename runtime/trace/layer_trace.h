// Per-layer forward and backward spans for the trace (output.trace = true). Backward spans come
// from the Tape's node observer; forward spans from the param-use hook: a layer's span opens when
// its first parameter is about to be read and closes when the next layer's opens (or at
// end_forward()). Time spent inside the wrapped hook (waiting for a bucket's broadcast in the
// overlap modes) becomes its own "wait params" span, so exposed broadcasts are visible.
// Everything here runs on the main thread.
#pragma once

#include <string>
#include <vector>

#include "models/parameter_store.h"
#include "models/tape.h"
#include "base/tracer.h"

namespace zl {

class LayerTrace {
 public:
  // `tracer` must be enabled and outlive this object (and every hook it returns).
  LayerTrace(Tracer& tracer, const ParameterStore& store);

  // The hook to hand to Model::forward: records layer spans, then calls `inner`.
  ParamUseHook forward_hook(const ParamUseHook& inner);
  // Closes the last layer's span; call after Model::forward returns.
  void end_forward();
  // Records a span per tape node during tape.backward().
  void observe_backward(Tape& tape);

 private:
  void before_param_use(int param_id, const ParamUseHook& inner);

  Tracer& tracer_;
  std::vector<std::string> layer_of_param_;  // "layers.3" for "layers.3.weight"
  std::string open_layer_;                   // empty: none open
  double open_begin_us_ = 0.0;
  double node_begin_us_ = 0.0;
};

}  // namespace zl
