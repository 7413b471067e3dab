// `zerolap inspect` of a sharded checkpoint (see inspect_sharded.h).
#include "runtime/cli/inspect_sharded.h"

#include <fmt/format.h>

#include "base/errors.h"
#include "base/regular_file.h"
#include "runtime/checkpoint/files/crc32.h"
#include "runtime/checkpoint/files/shard_manifest.h"

namespace zl {

void inspect_sharded_checkpoint(const std::string& manifest_path) {
  const Manifest m = read_manifest(manifest_path);
  const auto value = [&](const char* key) {
    const auto it = m.metadata.find(key);
    return it == m.metadata.end() ? std::string("?") : escaped_excerpt(it->second, 200);
  };
  std::int64_t numel = 0;
  for (const ManifestParameter& p : m.parameters) numel += p.numel();
  fmt::print(
      "{}: sharded checkpoint of step {} (generation {}), {} shards, {} parameters ({} "
      "elements), optimizer state [{}]\n",
      manifest_path, m.step, m.generation, m.shards.size(), m.parameters.size(), numel,
      fmt::join(m.state_names, ", "));
  fmt::print("precision {}, mode {}, written on {} ranks; parameters stored as fp32\n",
             value("precision"), value("mode"), value("world_size"));
  fmt::print("\n{:<40}  {:>4}  {:>12}  {:<8}  {:>6}  {}\n", "shard", "rank", "bytes", "crc32",
             "pieces", "check");
  std::string first_error;
  for (const ShardEntry& s : m.shards) {
    std::string check = "ok";
    try {
      verify_shard(manifest_path, s);
    } catch (const UserError& e) {
      check = "FAILED";
      if (first_error.empty()) first_error = e.what();
    }
    fmt::print("{:<40}  {:>4}  {:>12}  {:<8}  {:>6}  {}\n", escaped_excerpt(s.file, 200), s.rank,
               s.bytes, crc_hex(s.crc32), s.pieces.size(), check);
  }
  fmt::print("\nparameters:\n");
  for (const ManifestParameter& p : m.parameters) {
    fmt::print("  {}  [{}]\n", escaped_excerpt(p.name, 200), fmt::join(p.shape, ", "));
  }
  fmt::print("\nmetadata:\n");
  for (const auto& [key, v] : m.metadata) {
    if (key == "config") continue;
    fmt::print("  {} = {}\n", escaped_excerpt(key, 200), escaped_excerpt(v, 1000));
  }
  std::fflush(stdout);
  if (!first_error.empty()) throw UserError(first_error);
}

}  // namespace zl
