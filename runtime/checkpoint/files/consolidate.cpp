// `zerolap consolidate` (see consolidate.h). The output's tensors are the single-file checkpoint's
// of the same step, bitwise: the same names, shapes and fp32 values (docs/checkpoints.md).
#include "runtime/checkpoint/files/consolidate.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <iterator>

#include <fmt/format.h>

#include "base/errors.h"
#include "base/fault_stop.h"
#include "base/regular_file.h"
#include "runtime/checkpoint/files/checkpoint_files.h"
#include "runtime/checkpoint/files/run_identity.h"
#include "runtime/checkpoint/files/safetensors.h"
#include "runtime/checkpoint/files/shard_reader.h"

namespace zl {
namespace fs = std::filesystem;

namespace {
constexpr std::int64_t kChunkFloats = std::int64_t{1} << 20;  // 4 MiB

// The output is renamed over `out`, so it must be a new or a regular file, and never a file of a
// checkpoint: not inside the one it is made from (which it would otherwise replace a file of, or
// join), nor in another sharded checkpoint's directory, nor a `latest` pointer or a manifest
// anywhere; and never a file of a run's directory: a run.json or a lock file anywhere (a new one
// would make a directory look owned or locked), nor a run's output beside a run.json (the run's
// own metrics or config, which a resume checks). An existing file is replaced only with
// ExistingOutput::Replace (`--overwrite`).
void check_output(const std::string& out, const std::string& manifest_path,
                  ExistingOutput existing) {
  if (out.empty()) {
    throw UserError("consolidate: the output is an empty path; give the path of a .safetensors "
                    "file to write");
  }
  struct stat st {};
  const bool exists = ::lstat(out.c_str(), &st) == 0;
  if (exists && !S_ISREG(st.st_mode)) {
    throw UserError(fmt::format("consolidate: the output '{}' exists and is not a regular file "
                                "(it is {}); give the path of a .safetensors file to write",
                                out, file_type_name(st.st_mode)));
  }
  std::error_code ec;
  const fs::path parent = fs::path(out).parent_path();
  if (!parent.empty() && !fs::is_directory(parent, ec)) {
    throw UserError(fmt::format("consolidate: the output '{}': its directory '{}' does not exist",
                                out, parent.string()));
  }
  const fs::path step = fs::weakly_canonical(fs::path(manifest_path).parent_path(), ec);
  const fs::path where = fs::weakly_canonical(fs::absolute(out).parent_path(), ec);
  if (!ec && where == step) {
    throw UserError(fmt::format("consolidate: the output '{}' is inside the checkpoint it is made "
                                "from ('{}'); write it elsewhere",
                                out, step.string()));
  }
  const std::string name = fs::path(out).filename().string();
  const fs::path dir = parent.empty() ? fs::path(".") : parent;
  // A step_N.safetensors beside a `latest` is one of that checkpoint.dir's checkpoints (pruning
  // and resumes count it): replacing or adding one is the run's job, never consolidate's.
  const bool checkpoint_name_in_checkpoint_dir =
      checkpoint_step_of(name) >= 0 && fs::exists(dir / kLatestPointerName, ec);
  if (fs::exists(dir / kManifestName, ec) || checkpoint_name_in_checkpoint_dir ||
      name == kManifestName || name == kLatestPointerName) {
    throw UserError(fmt::format(
        "consolidate: the output '{}' is a file of a checkpoint (a sharded checkpoint's directory "
        "holds it, it is a step_N.safetensors beside a {}, or it is named {} or {}); write it "
        "elsewhere",
        out, kLatestPointerName, kManifestName, kLatestPointerName));
  }
  const bool run_output_beside_record =
      std::any_of(std::begin(kRunOutputFiles), std::end(kRunOutputFiles),
                  [&](const char* output) { return name == output; }) &&
      fs::exists(fs::symlink_status(dir / kRunRecordName, ec));
  if (name == kRunRecordName || name == kDirectoryLockName || run_output_beside_record) {
    throw UserError(fmt::format(
        "consolidate: the output '{}' is a file of a run's directory (it is named {} or {}, or it "
        "is a run's output beside a {}); write it elsewhere",
        out, kRunRecordName, kDirectoryLockName, kRunRecordName));
  }
  if (exists && existing == ExistingOutput::Refuse) {
    throw UserError(fmt::format("consolidate: the output '{}' exists; give --overwrite to replace "
                                "it, or another path",
                                out));
  }
}
}  // namespace

std::string consolidate_temp_path(const std::string& out) { return out + kCheckpointTempSuffix; }

std::size_t consolidate_checkpoint(const std::string& checkpoint, const std::string& out,
                                   ConsolidateState state, ExistingOutput existing) {
  const std::optional<std::string> manifest_path = sharded_manifest_of(checkpoint);
  std::error_code ec;
  if (!manifest_path && fs::is_regular_file(checkpoint, ec) &&
      checkpoint_step_of(fs::path(checkpoint).filename().string()) >= 0) {
    throw UserError(fmt::format("'{}' is a single-file checkpoint, already one safetensors file "
                                "(what consolidate writes): use it as it is",
                                checkpoint));
  }
  if (!manifest_path) {
    throw UserError(
        fmt::format("'{}' is not a sharded checkpoint (a step_<N> directory with a {}, "
                    "or that file)",
                    checkpoint, kManifestName));
  }
  check_output(out, *manifest_path, existing);
  // The checks every reader runs (the loaders, `inspect`): the facts, then each shard whole.
  const Manifest m = read_manifest(*manifest_path);
  check_manifest_facts(m, *manifest_path);
  ShardSet shards(m, *manifest_path);
  for (std::size_t i = 0; i < m.shards.size(); ++i) shards.verify(i);

  const bool with_state = state == ConsolidateState::Include;
  // The file's tensors in order: the parameters (which = -1), then their state (tensor_name).
  std::vector<std::pair<const ManifestParameter*, int>> order;
  for (const ManifestParameter& p : m.parameters) order.emplace_back(&p, -1);
  for (const ManifestParameter& p : m.parameters) {
    for (int s = 0; s < static_cast<int>(m.state_names.size()) && with_state; ++s) {
      order.emplace_back(&p, s);
    }
  }
  std::vector<TensorSpec> tensors;
  for (const auto& [p, which] : order) {
    tensors.push_back({tensor_name(p->name, m.state_names, which), "F32", p->shape});
  }
  std::map<std::string, std::string> metadata = m.metadata;
  if (!with_state) metadata[kOptimizerStateOmittedKey] = "true";
  const std::string temp = consolidate_temp_path(out);
  std::vector<float> chunk;
  {
    SafetensorsWriter writer(temp, tensors, metadata);
    for (const auto& [p, which] : order) {
      for (std::int64_t at = 0; at < p->numel(); at += kChunkFloats) {
        const std::int64_t n = std::min(kChunkFloats, p->numel() - at);
        chunk.resize(static_cast<std::size_t>(n));
        shards.read(p->name, which, at, at + n, chunk.data());
        writer.write_floats(chunk.data(), n);
      }
    }
    fault_stop_point("consolidate", 0);  // tests: a signal while the temporary file is open
    writer.finish();
  }
  rename_durably(temp, out);
  return tensors.size();
}

}  // namespace zl
