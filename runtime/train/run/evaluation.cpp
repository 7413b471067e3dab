// Evaluation on the test split, sharded over ranks (see evaluation.h).
#include "runtime/train/run/evaluation.h"

#include <algorithm>
#include <vector>

#include "base/fault_stop.h"
#include "data/sampler.h"
#include "models/losses.h"

namespace zl {

EvalResult evaluate_test_split(const EvalParts& parts) {
  const Dataset& test = parts.test;
  const int rank = parts.comm.rank();
  const Shard shard = eval_shard(test.num_samples, rank, parts.comm.size());
  const bool classification = test.task == TaskKind::Classification;
  double loss_sum = 0.0, correct = 0.0;
  std::vector<std::int64_t> indices;
  ParamUseHook hook;
  if (parts.gather) hook = [&parts](int param_id) { parts.gather->before_eval_read(param_id); };
  for (std::int64_t begin = shard.begin; begin < shard.end; begin += parts.eval_batch_size) {
    const std::int64_t batch = std::min(parts.eval_batch_size, shard.end - begin);
    indices.resize(static_cast<std::size_t>(batch));
    for (std::int64_t i = 0; i < batch; ++i) indices[static_cast<std::size_t>(i)] = begin + i;
    parts.batches.gather(test, indices);
    parts.tape.reset();
    const DeviceBatch in = parts.batches.upload(test.task);
    const Tensor x{in.x, batch, test.feature_dim, parts.compute.device};
    const ForwardResult out = parts.model.forward(parts.tape, x, hook);
    if (parts.gather) parts.gather->release_all();  // a forward no backward follows
    if (classification) {
      std::int64_t c = 0;
      loss_sum += cross_entropy_loss(parts.compute, out.output, in.labels, Tensor{}, 1.0f, &c);
      correct += static_cast<double>(c);
    } else {
      // Per-sample loss: the mean squared error over that sample's outputs.
      loss_sum += squared_error_loss(parts.compute, out.output, in.targets, Tensor{}, 1.0f) /
                  static_cast<double>(out.output.cols);
    }
  }
  if (parts.gather) {
    // The rank with the largest shard (rank 0) sets how many gather passes every rank runs.
    const Shard largest = eval_shard(test.num_samples, 0, parts.comm.size());
    const auto passes = [&](const Shard& s) {
      return (s.end - s.begin + parts.eval_batch_size - 1) / parts.eval_batch_size;
    };
    for (std::int64_t extra = passes(shard); extra < passes(largest); ++extra) {
      parts.gather->gather_pass();
    }
  }
  parts.tape.reset();
  fault_stop_point("evaluation", rank);
  std::vector<double> sums{loss_sum, correct, static_cast<double>(shard.end - shard.begin)};
  parts.comm.all_reduce_f64(sums.data(), static_cast<std::int64_t>(sums.size())).wait();
  const auto samples = static_cast<std::int64_t>(sums[2]);
  return EvalResult{.loss = samples > 0 ? sums[0] / sums[2] : 0.0,
                    .accuracy = classification && samples > 0 ? sums[1] / sums[2] : 0.0,
                    .samples = samples};
}

}  // namespace zl
