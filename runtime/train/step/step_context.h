// StepContext: what every part of one rank's step reads - the mode and bucket plans, the
// parameter store, the check of the step's collectives against its program (Note [Collective
// program]), the compute stream, and (both nullable) the tracer and the tests' observer.
// StepParts holds it; the Reducer, BucketOps, GradientStore, GradientPool, ParameterGather and
// the schedule refer to it.
#pragma once

#include <cstddef>

#include "base/exec_context.h"
#include "base/tracer.h"
#include "models/parameter_store.h"
#include "runtime/train/plan/bucket_plan.h"
#include "runtime/train/plan/collective_program.h"
#include "runtime/train/plan/mode_plan.h"
#include "runtime/train/step/step_observer.h"

namespace zl {

struct StepContext {
  const ModePlan& mode;
  const BucketPlan& plan;
  ParameterStore& store;
  ProgramCheck& program;
  ExecContext compute;
  Tracer* tracer = nullptr;
  StepObserver* observer = nullptr;  // tests: each step's events in the order they happen

  const Bucket& bucket(int index) const { return plan.buckets[static_cast<std::size_t>(index)]; }
  // Reports `kind` of bucket `index` to the observer, if there is one.
  void notify(StepEvent::Kind kind, int index) const {
    if (observer) observer->on_step_event({.kind = kind, .bucket = index});
  }
  // Where the step's timeline spans go: the tracer's timeline, or nowhere without a tracer.
  StreamTimeline* timeline() const { return tracer ? &tracer->timeline() : nullptr; }
};

}  // namespace zl
