// `zerolap inspect FILE`: lists the tensors (name, dtype, shape, bytes, CRC32) and the metadata of
// a safetensors checkpoint after validating its structure and checksums. Any safetensors file is
// listed; a corrupt or truncated one is a UserError (exit 2) naming the file and the tensor. A
// checkpoint directory, or its `latest` pointer, stands for the checkpoint `latest` names.
#include <algorithm>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "base/errors.h"
#include "base/regular_file.h"
#include "base/standard_output.h"
#include "runtime/checkpoint/files/crc32.h"
#include "runtime/checkpoint/files/checkpoint_files.h"
#include "runtime/checkpoint/files/safetensors.h"
#include "runtime/checkpoint/files/shard_manifest.h"
#include "runtime/checkpoint/files/shard_reader.h"
#include "runtime/cli/commands.h"

namespace zl {
namespace {

std::string checkpoint_file(const std::string& path) {
  if (const auto manifest = sharded_manifest_of(path)) return *manifest;  // a sharded checkpoint
  if (const auto latest = checkpoint_named_by_latest(path)) return *latest;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw UserError(fmt::format("{}: no checkpoint to inspect (no '{}' pointer in it)", path,
                                kLatestPointerName));
  }
  return path;
}

// A sharded checkpoint: the manifest's facts, then every shard with its rank, size, CRC32 and
// whether the file matches them; a shard that is missing, truncated or differs is listed as such,
// and then reported as a UserError (exit 2) naming the first one. The manifest and the shards go
// through the checks the loaders and `consolidate` run (the same functions), so a checkpoint
// listed as ok is one they read.
void inspect_sharded_checkpoint(const std::string& manifest_path) {
  const Manifest m = read_manifest(manifest_path);
  check_manifest_facts(m, manifest_path);
  ShardSet shards(m, manifest_path);
  const auto value = [&](const char* key) {
    const auto it = m.metadata.find(key);
    return it == m.metadata.end() ? std::string("?") : escaped_excerpt(it->second, 200);
  };
  std::int64_t numel = 0;
  for (const ManifestParameter& p : m.parameters) numel += p.numel();
  // The manifest's bytes, escaped like every name below: no control byte reaches the terminal.
  std::vector<std::string> state_names;
  for (const std::string& name : m.state_names) {
    state_names.push_back(escaped_excerpt(name, 200, Quotes::AsIs));
  }
  fmt::print(
      "{}: sharded checkpoint of step {} (generation {}), {} shard{}, {} parameters ({} "
      "elements), optimizer state [{}]\n",
      manifest_path, m.step, m.generation, m.shards.size(), m.shards.size() == 1 ? "" : "s",
      m.parameters.size(), numel,
      fmt::join(state_names, ", "));
  fmt::print("precision {} (reduce_dtype {}, master_weights {}), mode {}, written on {} rank{}; "
             "parameters stored as fp32\n",
             value("precision"), value("reduce_dtype"), value("master_weights"), value("mode"),
             value("world_size"), m.world_size == 1 ? "" : "s");
  fmt::print("\n{:<40}  {:>4}  {:>12}  {:<8}  {:>6}  {}\n", "shard", "rank", "bytes", "crc32",
             "pieces", "check");
  std::string first_error;
  for (std::size_t i = 0; i < m.shards.size(); ++i) {
    const ShardEntry& s = m.shards[i];
    std::string check = "ok";
    try {
      shards.verify(i);
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
  if (!first_error.empty()) {
    std::fflush(stdout);  // the listing before the error, which is the exit code's (2)
    throw UserError(first_error);
  }
  flush_standard_output();
}

// A safetensors file: its tensors with their checksums, its metadata, and the config of the run
// that wrote it, after verify_checksums (a corrupt file is a UserError).
void inspect_file(const std::string& path) {
  const SafetensorsReader file(path);
  file.verify_checksums();
  fmt::print("{}: {} tensors, {} bytes of data, {}-byte header, checksums {}\n", path,
             file.tensors().size(), file.data_bytes(), file.header_bytes(),
             file.has_checksums() ? "ok (CRC32)" : "absent (not written by zerolap)");
  // Names and metadata are the file's bytes: printed escaped and bounded, so control bytes
  // never reach the terminal and a huge name cannot flood it.
  const auto shown = [](std::string_view text, std::size_t max) {
    return escaped_excerpt(text, max, Quotes::AsIs);
  };
  // A zerolap checkpoint's precision up front: its parameter tensors are fp32 either way (the
  // masters of a bf16 run), so the dtype column alone cannot say what trained it.
  const auto& meta = file.metadata();
  if (meta.count("precision") != 0 && meta.count("step") != 0) {
    const auto value = [&](const char* key) {
      const auto it = meta.find(key);
      return it == meta.end() ? std::string("?") : shown(it->second, 200);
    };
    fmt::print("step {}, precision {} (reduce_dtype {}, master_weights {}); parameters stored as "
               "fp32{}\n",
               value("step"), value("precision"), value("reduce_dtype"), value("master_weights"),
               value("precision") == "bf16" ? " master weights" : "");
  }
  std::size_t width = 4;
  for (const TensorEntry& t : file.tensors()) width = std::max(width, shown(t.name, 200).size());
  fmt::print("\n{:<{}}  {:<5}  {:<14}  {:>12}  {}\n", "name", width, "dtype", "shape", "bytes",
             "crc32");
  for (const TensorEntry& t : file.tensors()) {
    const auto crc = meta.find(tensor_crc_key(t.name));
    fmt::print("{:<{}}  {:<5}  {:<14}  {:>12}  {}\n", shown(t.name, 200), width,
               shown(t.dtype, 16), format_shape(t.shape), t.end - t.begin,
               crc == meta.end() ? "-" : shown(crc->second, 16));
  }
  fmt::print("\nmetadata:\n");
  const std::string multi_line_key = "config";
  for (const auto& [key, value] : meta) {
    if (key.rfind(tensor_crc_key(""), 0) == 0 || key == multi_line_key) continue;
    fmt::print("  {} = {}\n", shown(key, 200), shown(value, 1000));
  }
  if (const auto config = meta.find(multi_line_key); config != meta.end()) {
    fmt::print("\nconfig of the run that wrote it:\n");
    std::istringstream lines(config->second);
    for (std::string line; std::getline(lines, line);) fmt::print("  {}\n", shown(line, 1000));
  }
  flush_standard_output();
}

}  // namespace

int run_inspect_command(const std::string& given_path, const World& world) {
  agree_on_user_errors(world, [&] {
    if (!world.is_root()) return;  // one listing per job, however many ranks
    const std::string path = checkpoint_file(given_path);
    if (path != given_path) fmt::print("{}: latest checkpoint {}\n", given_path, path);
    if (sharded_manifest_of(path)) {
      inspect_sharded_checkpoint(path);
    } else {
      inspect_file(path);
    }
  });
  return 0;
}

}  // namespace zl
