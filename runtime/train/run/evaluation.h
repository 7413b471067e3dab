// Evaluation on the test split, sharded over ranks (data/sampler.h eval_shard): each rank runs
// forward on its shard in batches of data.eval_batch_size, and one all-reduce gives every rank
// the mean loss and accuracy of the whole split.
#pragma once

#include <cstdint>

#include "base/exec_context.h"
#include "data/dataset.h"
#include "models/model.h"
#include "models/tape.h"
#include "runtime/comm/communicator.h"
#include "runtime/train/run/batch_loader.h"
#include "runtime/train/step/parameter_gather.h"

namespace zl {

struct EvalResult {
  double loss = 0.0;      // mean over the test set
  double accuracy = 0.0;  // fraction in [0, 1]; 0 for regression
  std::int64_t samples = 0;
};

// What an evaluation reads and uses; every reference outlives the call.
struct EvalParts {
  const Dataset& test;
  std::int64_t eval_batch_size = 1000;  // data.eval_batch_size
  Model& model;
  Tape& tape;  // reset before and after
  BatchLoader& batches;
  Communicator& comm;  // the sums' all-reduce
  ExecContext compute;
  // ZeRO stage 3: forward gathers through it, and every rank runs as many forwards as the rank
  // with the largest shard (the gathers are collective; a rank out of samples gathers only).
  ParameterGather* gather = nullptr;
};

// Collective over `parts.comm`. Call with no step in flight (the parameters are read).
EvalResult evaluate_test_split(const EvalParts& parts);

}  // namespace zl
