// run_training: the run loop of `zerolap train` above a Trainer - steps to the configured end,
// progress lines and metrics.csv rows every train.log_every steps (rank 0), evaluation every
// train.eval_every steps and at the end, checkpoints at checkpoint.every and the last step.
// It sits above both runtime/train and runtime/checkpoint so neither depends on the other.
#pragma once

#include "runtime/cli/interrupt.h"
#include "runtime/train/run/trainer.h"

namespace zl {

// Trains from the trainer's position to its total_steps. Collective. Returns 0, or the signal
// (SIGINT, SIGTERM) every rank stopped for after the same step, a checkpoint of it written when
// checkpoint.dir is set (runtime/cli/interrupt.h). `interrupts`: the command's handlers, whose
// notes say, once the last step is done, that a signal lets the final evaluation finish.
int run_training(Trainer& trainer, InterruptHandlers& interrupts);

}  // namespace zl
