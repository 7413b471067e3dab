// What the ranks of a training job compare at start-up (runtime/comm/rank_agreement.h): the
// build, every config key that affects results, and a fingerprint of the data each rank loaded.
// Where the data lives (data.path, data.train_images, ...) is left out of the config facts: a path
// may differ between nodes, what it holds may not, and the data facts compare exactly that.
#pragma once

#include <vector>

#include "data/dataset.h"
#include "runtime/comm/rank_agreement.h"
#include "runtime/config/config.h"

namespace zl {

// "build version", one fact per key of result_entries(config) but the data locations, and the
// keys that schedule collectives without affecting results (Note [Collective schedule keys]):
// checkpoint.dir (set or not), checkpoint.every, output.trace.
std::vector<RankFact> config_facts(const Config& config);

// "training inputs", "training labels" (or targets), "test inputs", "test labels": shape and
// checksum, with the file or generator each came from as the detail.
std::vector<RankFact> data_facts(const Config& config, const DatasetSplits& data);

}  // namespace zl
