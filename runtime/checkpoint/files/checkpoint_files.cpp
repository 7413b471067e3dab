// The rank-local half of checkpoints (see checkpoint_files.h).
#include "runtime/checkpoint/files/checkpoint_files.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>

#include "base/checked_write.h"
#include "base/errors.h"
#include "base/regular_file.h"
#include "models/parameter_store.h"
#include "runtime/checkpoint/files/checkpoint_pruning.h"
#include "runtime/checkpoint/files/checkpoint_values.h"
#include "runtime/checkpoint/files/run_identity.h"
#include "runtime/checkpoint/files/safetensors.h"
#include "runtime/checkpoint/files/shard_manifest.h"

namespace zl {
namespace fs = std::filesystem;

namespace {

constexpr const char* kNamePrefix = "step_";
constexpr const char* kNameSuffix = ".safetensors";
// A `latest` pointer holds one file name and a newline.
constexpr std::int64_t kMaxPointerBytes = 4096;

[[noreturn]] void fail(const SafetensorsReader& file, const std::string& what) {
  throw UserError(fmt::format("checkpoint file '{}': {}", file.path(), what));
}

std::int64_t metadata_int(const SafetensorsReader& file, const std::string& key) {
  const auto it = file.metadata().find(key);
  if (it == file.metadata().end()) {
    fail(file, fmt::format("metadata '{}' is missing (a zerolap checkpoint always has it; the "
                           "header was damaged or the file was written by another tool)",
                           key));
  }
  const std::optional<std::int64_t> value = parse_count(it->second);
  if (!value) {
    fail(file, fmt::format("metadata '{}' = '{}' is not a non-negative integer", key,
                           escaped_excerpt(it->second)));
  }
  return *value;
}

// Checks one tensor the loader will read: present, F32, the parameter's shape.
void check_tensor(const SafetensorsReader& file, const std::string& name,
                  const std::vector<std::int64_t>& shape, const char* missing_hint) {
  const TensorEntry* t = file.find(name);
  if (!t) fail(file, fmt::format("missing tensor '{}': {}", name, missing_hint));
  if (t->dtype != "F32") {
    fail(file, fmt::format("tensor '{}' has dtype {}; zerolap checkpoints hold F32 (float32) "
                           "tensors only",
                           name, t->dtype));
  }
  if (t->shape != shape) {
    fail(file, fmt::format("tensor '{}' has shape {}, this model's parameter has {}: the "
                           "checkpoint was written for another model (compare model.kind and "
                           "model.widths with the config in `zerolap inspect {}`)",
                           name, format_shape(t->shape), format_shape(shape), file.path()));
  }
}

// "step_<step><suffix>", the step zero-padded to 8 digits, and its inverse: the step of such a
// name, or -1 for another name.
std::string step_name(std::int64_t step, const char* suffix) {
  return fmt::format("{}{:08d}{}", kNamePrefix, step, suffix);
}

std::int64_t step_in_name(const std::string& name, const char* suffix) {
  const std::size_t prefix = std::strlen(kNamePrefix), tail = std::strlen(suffix);
  if (name.size() <= prefix + tail || !name.starts_with(kNamePrefix) || !name.ends_with(suffix)) {
    return -1;
  }
  return parse_count(std::string_view(name).substr(prefix, name.size() - prefix - tail))
      .value_or(-1);
}

std::string state_tensor_name(const std::string& param, const std::string& state) {
  return fmt::format("optimizer.{}.{}", param, state);
}

}  // namespace

std::string metadata_value(const std::map<std::string, std::string>& metadata,
                           const std::string& key) {
  const auto it = metadata.find(key);
  return it == metadata.end() ? std::string() : it->second;
}

std::string name_list(const std::vector<std::string>& names, std::size_t shown) {
  std::string out;
  for (std::size_t i = 0; i < names.size() && i < shown; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > shown) out += fmt::format(" and {} more", names.size() - shown);
  return out;
}

std::optional<std::int64_t> parse_count(std::string_view text) {
  std::int64_t value = -1;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 0) return std::nullopt;
  return value;
}

void rename_durably(const fs::path& temp, const fs::path& path, const char* what) {
  std::error_code ec;
  fs::rename(temp, path, ec);
  if (ec) {
    throw RuntimeFailure(fmt::format("cannot rename {}'{}' to '{}': {}", what, temp.string(),
                                     path.string(), ec.message()));
  }
  sync_directory(path.has_parent_path() ? path.parent_path().string() : ".");
}

void replace_file_durably(const std::string& dir, const std::string& name, const std::string& text,
                          const char* what) {
  const fs::path temp = fs::path(dir) / (name + kCheckpointTempSuffix);
  write_whole_file_durably(temp.string(), text, what);
  rename_durably(temp, fs::path(dir) / name);
}

std::string tensor_name(const std::string& param, const std::vector<std::string>& states,
                        int which) {
  if (which < 0) return param;
  return state_tensor_name(param, states[static_cast<std::size_t>(which)]);
}

std::string checkpoint_file_name(std::int64_t step) { return step_name(step, kNameSuffix); }

std::int64_t checkpoint_step_of(const std::string& name) { return step_in_name(name, kNameSuffix); }

std::string sharded_dir_name(std::int64_t step) { return step_name(step, ""); }

std::int64_t sharded_step_of(const std::string& name) { return step_in_name(name, ""); }

bool checkpoint_due(const CheckpointConfig& config, std::int64_t step, std::int64_t total_steps) {
  if (config.dir.empty()) return false;
  return step == total_steps || (config.every > 0 && step % config.every == 0);
}

CheckpointFacts check_checkpoint(const SafetensorsReader& file, const ParameterStore& store,
                                 const OptimizerConfig& optimizer,
                                 const std::vector<std::string>& state_names) {
  const auto meta = [&](const char* key) { return metadata_value(file.metadata(), key); };
  if (meta("format") != kCheckpointFormat) {
    fail(file, "not a zerolap checkpoint (its __metadata__ has no format = "
               "\"zerolap-checkpoint\"): zerolap resumes only from checkpoints it wrote");
  }
  if (meta("format_version") != kCheckpointFormatVersion) {
    fail(file, fmt::format("format_version '{}', this zerolap reads version {}",
                           escaped_excerpt(meta("format_version")), kCheckpointFormatVersion));
  }
  if (!file.has_checksums()) fail(file, "has no CRC32 in its metadata: cannot check integrity");
  // The values of every tensor the loader will read are checked in the same pass that verifies
  // the checksums (check_checkpoint_values); a bad value is reported once the checksums hold, so
  // damage is named as damage, not as the value it made.
  std::set<std::string> expected;
  for (const ParameterInfo& p : store.parameters()) {
    expected.insert(p.name);
    for (const std::string& s : state_names) expected.insert(state_tensor_name(p.name, s));
  }
  std::exception_ptr bad_value;
  std::vector<float> values;
  file.verify_checksums([&](const TensorEntry& t, std::uint64_t offset, const char* bytes,
                            std::size_t size) {
    if (bad_value || t.dtype != "F32" || expected.count(t.name) == 0) return;
    values.resize(size / sizeof(float));
    std::memcpy(values.data(), bytes, values.size() * sizeof(float));
    try {
      check_checkpoint_values(file.path(), t.name, values.data(),
                              static_cast<std::int64_t>(values.size()),
                              static_cast<std::int64_t>(offset / sizeof(float)));
    } catch (const UserError&) {
      bad_value = std::current_exception();
    }
  });

  CheckpointFacts facts;
  for (const auto& [key, field] : kFactKeys) facts.*field = metadata_int(file, key);
  facts.config_toml = meta("config");
  check_checkpoint_facts(file.path(), facts);

  const std::string kind = meta("optimizer");
  if (kind != to_string(optimizer.kind)) {
    fail(file, fmt::format("written with optimizer.kind = \"{0}\", the config has \"{1}\": "
                           "optimizer state does not convert between kinds; set optimizer.kind = "
                           "\"{0}\" to resume from it",
                           escaped_excerpt(kind), to_string(optimizer.kind)));
  }
  const std::string states = fmt::format("{}", fmt::join(state_names, ","));
  if (meta("optimizer_state") != states) {
    fail(file, fmt::format("holds optimizer state [{}], this optimizer keeps [{}]: set "
                           "optimizer.momentum as in the run that wrote it (SGD keeps a "
                           "momentum_buffer only when momentum != 0)",
                           escaped_excerpt(meta("optimizer_state")), states));
  }

  if (!state_names.empty() && meta(kOptimizerStateOmittedKey) == "true") {
    fail(file, fmt::format("holds parameters only (consolidate --no-optimizer), and resuming "
                           "needs the optimizer state [{}]: resume from the sharded checkpoint, "
                           "or a file consolidated without --no-optimizer",
                           states));
  }
  for (const ParameterInfo& p : store.parameters()) {
    check_tensor(file, p.name, p.shape,
                 "this model has that parameter, the checkpoint does not: it was written for "
                 "another model (compare model.kind and model.widths)");
    for (const std::string& s : state_names) {
      check_tensor(file, state_tensor_name(p.name, s), p.shape,
                   "the optimizer state of that parameter is absent");
    }
  }
  for (const TensorEntry& t : file.tensors()) {
    if (!expected.count(t.name)) {
      fail(file, fmt::format("unexpected tensor '{}': this model has no such parameter; the "
                             "checkpoint was written for another model (compare model.kind and "
                             "model.widths)",
                             escaped_excerpt(t.name)));
    }
  }
  if (bad_value) std::rethrow_exception(bad_value);
  return facts;
}

std::int64_t convert_cursor(const CheckpointFacts& facts, std::int64_t global_batch,
                            std::int64_t batches_per_epoch) {
  if (facts.global_batch == global_batch || facts.batches_per_epoch <= 0) return facts.cursor;
  const std::int64_t epoch = facts.cursor / facts.batches_per_epoch;
  const std::int64_t samples = (facts.cursor % facts.batches_per_epoch) * facts.global_batch;
  const std::int64_t within = (samples + global_batch - 1) / global_batch;
  if (within >= batches_per_epoch) return (epoch + 1) * batches_per_epoch;
  return epoch * batches_per_epoch + within;
}

// --- the directory protocol -------------------------------------------------------------------

// The advice of a broken `latest`, for a resume and for inspect alike.
constexpr const char* kNameTheCheckpoint =
    "name the checkpoint itself instead (a <file>.safetensors, or a sharded step_<N> directory; "
    "for a resume, as checkpoint.resume = \"...\")";

std::optional<std::string> latest_checkpoint(const std::string& dir) {
  const fs::path pointer = fs::path(dir) / kLatestPointerName;
  std::error_code ec;
  if (!fs::exists(pointer, ec)) {
    // A name that is there but leads nowhere (a symlink loop, a dangling link) is a broken
    // pointer, not a missing one.
    std::error_code link_ec;
    if (!fs::exists(fs::symlink_status(pointer, link_ec))) return std::nullopt;
    throw UserError(fmt::format("checkpoint pointer '{}' cannot be read ({}): {}",
                                pointer.string(), ec ? ec.message() : "a link to nothing",
                                kNameTheCheckpoint));
  }
  // A pointer holds one file name: read without blocking (a FIFO named `latest` must not hang the
  // job), at most kMaxPointerBytes, and echoed in messages only as a bounded, escaped excerpt.
  const std::string text =
      read_small_file(pointer.string(), "checkpoint pointer", kMaxPointerBytes);
  std::string name = text;
  while (!name.empty() && std::isspace(static_cast<unsigned char>(name.back()))) name.pop_back();
  const bool printable = std::all_of(name.begin(), name.end(), [](char c) {
    return static_cast<unsigned char>(c) >= 0x20 && static_cast<unsigned char>(c) != 0x7F;
  });
  if (!printable) {
    throw UserError(fmt::format("checkpoint pointer '{}' does not hold one file name (it holds "
                                "\"{}\"): {}",
                                pointer.string(), escaped_excerpt(text), kNameTheCheckpoint));
  }
  if (name.empty()) {
    throw UserError(
        fmt::format("checkpoint pointer '{}' is empty: {}", pointer.string(), kNameTheCheckpoint));
  }
  const fs::path path = fs::path(name).is_absolute() ? fs::path(name) : fs::path(dir) / name;
  if (!fs::exists(path, ec)) {
    // The form of checkpoint the pointer named: a sharded one is resumed from its directory.
    const bool sharded = path.filename() == kManifestName;
    throw UserError(fmt::format("checkpoint pointer '{}' names '{}', which does not exist: set "
                                "checkpoint.resume = \"{}\" to one that does",
                                pointer.string(), escaped_excerpt(path.string(), 200),
                                sharded ? "<checkpoint.dir>/step_<N>" : "<file>.safetensors"));
  }
  return path.string();
}

std::optional<std::string> checkpoint_named_by_latest(const std::string& path) {
  std::error_code ec;
  const fs::path given(path);
  if (fs::is_directory(given, ec)) {
    return sharded_manifest_of(path) ? std::nullopt : latest_checkpoint(path);
  }
  if (given.filename() != kLatestPointerName) return std::nullopt;
  return latest_checkpoint(given.has_parent_path() ? given.parent_path().string() : ".");
}

std::int64_t latest_step(const std::string& dir) {
  try {
    const auto latest = latest_checkpoint(dir);
    if (!latest) return -1;
    const fs::path p(*latest);
    // The pointer names a file, a sharded checkpoint's manifest, or (after a branch's removals,
    // apply_checkpoint_removals) a sharded checkpoint's directory.
    if (p.filename() == kManifestName) return sharded_step_of(p.parent_path().filename().string());
    const std::int64_t step = checkpoint_step_of(p.filename().string());
    return step >= 0 ? step : sharded_step_of(p.filename().string());
  } catch (const UserError&) {
    return -1;
  }
}

namespace {

// The newest checkpoint in `dir` of the run its run.json names (listed only when whole: a file
// renamed into place, a sharded directory with its manifest); nullopt when there is none.
std::optional<std::string> newest_checkpoint_of_owner(const std::string& dir) {
  const auto owner = read_run_record(dir);
  if (!owner) return std::nullopt;
  const std::vector<DirCheckpoint> found = list_checkpoints(dir);
  for (auto c = found.rbegin(); c != found.rend(); ++c) {
    if (c->run_id && *c->run_id == owner->run_id) return (fs::path(dir) / c->name).string();
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> checkpoint_to_resume(const CheckpointConfig& c) {
  if (!c.resume) return std::nullopt;
  std::error_code ec;
  std::string path = c.resume_path, where;
  if (path.empty()) {
    const auto latest = latest_checkpoint(c.dir);
    if (!latest) return newest_checkpoint_of_owner(c.dir);
    path = *latest;
    where = fmt::format("'{}' names '{}'", (fs::path(c.dir) / kLatestPointerName).string(), path);
  } else {
    where = fmt::format("checkpoint.resume = \"{}\"", path);
    if (!fs::exists(path, ec)) {
      throw UserError(fmt::format("{}: no such file (a path to a .safetensors checkpoint or a "
                                  "sharded checkpoint's directory, or true for the latest in "
                                  "checkpoint.dir)",
                                  where));
    }
    if (const auto named = checkpoint_named_by_latest(path)) {
      where = fmt::format("{} ('{}' names '{}')", where, kLatestPointerName, *named);
      path = *named;
    }
  }
  if (fs::is_directory(path, ec) && !sharded_manifest_of(path)) {
    throw UserError(fmt::format("{}: a directory with neither a {} (a sharded checkpoint; it is "
                                "written last, so without it the write did not finish) nor a {} "
                                "(a checkpoint.dir): resume from another step",
                                where, kManifestName, kLatestPointerName));
  }
  // Anything else (a FIFO, a damaged file) is refused by the reader, which opens it without
  // blocking and names what it is.
  return path;
}

void sync_directory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECTORY);
  if (fd < 0 || ::fsync(fd) != 0) {
    const std::string reason = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    throw RuntimeFailure(fmt::format("cannot fsync directory '{}': {}", dir, reason));
  }
  ::close(fd);
}

void write_latest_pointer(const std::string& dir, const std::string& file_name) {
  replace_file_durably(dir, kLatestPointerName, file_name + "\n", "checkpoint pointer");
}

void checkpoint_fault_point(const char* point, std::int64_t step) {
  const char* value = std::getenv(kFaultEnvVar);
  if (!value) return;
  const std::string spec = value;
  const std::size_t colon = spec.find(':');
  if (spec.substr(0, colon) != point) return;
  if (colon != std::string::npos && spec.substr(colon + 1) != std::to_string(step)) return;
  std::fprintf(stderr, "zerolap: %s=%s: simulated crash at step %lld\n", kFaultEnvVar, value,
               static_cast<long long>(step));
  std::fflush(stderr);
  ::_exit(kFaultExitCode);
}

}  // namespace zl
