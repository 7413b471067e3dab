// Reading pieces of a sharded checkpoint's shards (see shard_reader.h).
#include "runtime/checkpoint/files/shard_reader.h"

#include <algorithm>

#include <fmt/format.h>

#include "base/errors.h"
#include "base/regular_file.h"
#include "runtime/checkpoint/files/checkpoint_files.h"

namespace zl {

ShardSet::ShardSet(const Manifest& m, std::string manifest_path)
    : m_(m), path_(std::move(manifest_path)), readers_(m.shards.size()) {
  for (std::size_t i = 0; i < m.shards.size(); ++i) {
    for (const ShardPiece& p : m.shards[i].pieces) by_param_[p.name].push_back({i, &p});
  }
}

const SafetensorsReader& ShardSet::open(std::size_t i) {
  if (!readers_.at(i)) readers_[i] = checked_reader(i);
  return *readers_[i];
}

void ShardSet::verify(std::size_t i) const {
  verify_shard(path_, m_.shards.at(i));
  checked_reader(i);  // not kept: a set of thousands of shards is verified one file at a time
}

std::unique_ptr<SafetensorsReader> ShardSet::checked_reader(std::size_t i) const {
  const ShardEntry& s = m_.shards.at(i);
  const std::string file = complete_shard_path(path_, s);
  auto reader = std::make_unique<SafetensorsReader>(file);
  const auto value = [&](const std::string& key) {
    return metadata_value(reader->metadata(), key);
  };
  if (value("format") != kShardFormat || value("step") != std::to_string(m_.step) ||
      value("rank") != std::to_string(s.rank) ||
      value("world_size") != std::to_string(m_.world_size) ||
      value("generation") != std::to_string(m_.generation)) {
    throw UserError(
        fmt::format("checkpoint shard '{}' is a foreign file: it is not shard {} of "
                    "step {} (generation {}) that '{}' names",
                    file, s.rank, m_.step, m_.generation, path_));
  }
  for (const ShardPiece& p : s.pieces) {
    for (int which = -1; which < static_cast<int>(m_.state_names.size()); ++which) {
      const std::string name = tensor_name(p.name, m_.state_names, which);
      const TensorEntry* t = reader->find(name);
      if (!t || t->dtype != "F32" || t->shape != std::vector<std::int64_t>{p.numel} ||
          value("begin." + p.name) != std::to_string(p.begin)) {
        throw UserError(
            fmt::format("checkpoint shard '{}': tensor '{}' is not the piece [{}, "
                        "+{}) its manifest '{}' names",
                        file, escaped_excerpt(name), p.begin, p.numel, path_));
      }
    }
  }
  return reader;
}

void ShardSet::read(const std::string& param, int which, std::int64_t lo, std::int64_t hi,
                    float* out) {
  const std::string tensor = tensor_name(param, m_.state_names, which);
  for (const auto& [shard, p] : by_param_.at(param)) {
    const std::int64_t a = std::max(lo, p->begin), b = std::min(hi, p->begin + p->numel);
    if (a >= b) continue;
    const SafetensorsReader& r = open(shard);
    const TensorEntry* t = r.find(tensor);
    r.read_data(t->begin + static_cast<std::uint64_t>(a - p->begin) * sizeof(float), out + (a - lo),
                static_cast<std::size_t>(b - a) * sizeof(float));
  }
}

}  // namespace zl
