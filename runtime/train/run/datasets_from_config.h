// Builds the train/test datasets a config names and checks they fit the model (input width =
// feature dimension, output width = classes or targets); a mismatch is a UserError naming the keys.
#pragma once

#include "data/dataset.h"
#include "runtime/config/config.h"

namespace zl {

DatasetSplits load_datasets(const Config& config);

}  // namespace zl
