// check_run_outputs: which files in output.dir and checkpoint.dir belong to another run.
#include "runtime/checkpoint/run_outputs.h"

#include <algorithm>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/errors.h"
#include "base/regular_file.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/safetensors.h"
#include "runtime/checkpoint/shard_manifest.h"

namespace zl {
namespace fs = std::filesystem;
namespace {

constexpr const char* kOutputFiles[] = {"metrics.csv", "config.toml", "trace.json"};
constexpr const char* kBenchFiles[] = {"bench.json", "bench.csv"};
constexpr std::size_t kNamesShown = 4;  // files named in a message; the rest are counted

// A saved config.toml is far below this; anything larger is not one.
constexpr std::int64_t kMaxSavedConfigBytes = std::int64_t{16} << 20;

std::string name_list(const std::vector<std::string>& names) {
  std::string out;
  for (std::size_t i = 0; i < names.size() && i < kNamesShown; ++i) {
    out += (i ? ", " : "") + names[i];
  }
  if (names.size() > kNamesShown) out += fmt::format(" and {} more", names.size() - kNamesShown);
  return out;
}

std::string differences_text(const std::vector<std::string>& keys) {
  return keys.empty() ? std::string() : fmt::format("its config differs in {}", name_list(keys));
}

// A checkpoint in checkpoint.dir and why it belongs to another run ("" when it is this run's).
struct DirCheckpoint {
  std::int64_t step = 0;
  fs::path path;
  std::string foreign;
};

std::vector<DirCheckpoint> checkpoints_in(const std::string& dir) {
  std::vector<DirCheckpoint> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::int64_t step = checkpoint_step_of(entry.path().filename().string());
    if (step >= 0) found.push_back({step, entry.path(), {}});
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.step < b.step; });
  return found;
}

// Why checkpoint `path` is not this run's: the world size or a results-affecting key differs, or
// its metadata cannot be read. "" when it is this run's.
std::string foreign_reason(const fs::path& path, const std::string& run_toml, int world_size) {
  try {
    const SafetensorsReader file(path.string());
    const auto& meta = file.metadata();
    const auto config = meta.find("config");
    const auto world = meta.find("world_size");
    if (config == meta.end() || world == meta.end()) return "no zerolap run metadata";
    std::vector<std::string> why;
    if (world->second != std::to_string(world_size)) {
      why.push_back(fmt::format("written on {} ranks, this run has {}",
                                escaped_excerpt(world->second), world_size));
    }
    if (const auto keys = result_differences(config->second, run_toml); !keys.empty()) {
      why.push_back(differences_text(keys));
    }
    return fmt::format("{}", fmt::join(why, "; "));
  } catch (const UserError& e) {
    return fmt::format("unreadable ({})", e.what());
  }
}

// The step the run starts from: the resumed checkpoint's, 0 for a fresh start.
std::int64_t start_step(const CheckpointConfig& c) {
  if (!c.resume) return 0;
  std::string path = c.resume_path;
  if (path.empty()) {
    const auto latest = latest_checkpoint(c.dir);
    if (!latest) return 0;
    path = *latest;
  }
  // A sharded checkpoint (its directory or manifest): the manifest's step.
  if (const auto manifest = sharded_manifest_of(path)) return read_manifest(*manifest).step;
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return 0;  // prepare_checkpoints reports a missing file
  const SafetensorsReader file(path);            // a damaged one is reported here, exit 2
  const auto step = file.metadata().find("step");
  const std::int64_t from_name = checkpoint_step_of(fs::path(path).filename().string());
  if (step == file.metadata().end()) return std::max<std::int64_t>(from_name, 0);
  return std::max<std::int64_t>(std::strtoll(step->second.c_str(), nullptr, 10), 0);
}

// Removes the other run's checkpoints the user asked to replace, and points `latest` at the
// newest one left (or removes it when none is).
void remove_checkpoints(const std::string& dir, const std::vector<DirCheckpoint>& gone) {
  std::error_code ec;
  for (const DirCheckpoint& c : gone) {
    if (!fs::remove(c.path, ec) && ec) {
      throw UserError(fmt::format("checkpoint.overwrite = true: cannot remove '{}': {}",
                                  c.path.string(), ec.message()));
    }
  }
  const std::vector<DirCheckpoint> left = checkpoints_in(dir);
  if (left.empty()) {
    fs::remove(fs::path(dir) / kLatestPointerName, ec);
  } else {
    write_latest_pointer(dir, left.back().path.filename().string());
  }
  sync_directory(dir);
}

}  // namespace

std::vector<std::string> result_differences(const std::string& a_toml, const std::string& b_toml) {
  std::vector<std::string> keys = config_differences(a_toml, b_toml);
  keys.erase(std::remove_if(keys.begin(), keys.end(),
                            [](const std::string& k) { return !key_affects_results(k); }),
             keys.end());
  return keys;
}

void check_run_outputs(const Config& config, int world_size, bool quiet) {
  const std::string run_toml = to_toml(config);
  const CheckpointConfig& ck = config.checkpoint;
  const std::int64_t start = start_step(ck);

  // Checkpoints after the start step: this run writes and prunes among them.
  std::vector<DirCheckpoint> later, foreign;
  std::error_code ec;
  if (!ck.dir.empty() && fs::is_directory(ck.dir, ec)) {
    for (DirCheckpoint& c : checkpoints_in(ck.dir)) {
      if (c.step <= start) continue;
      c.foreign = foreign_reason(c.path, run_toml, world_size);
      later.push_back(c);
      if (!c.foreign.empty()) foreign.push_back(c);
    }
  }
  std::vector<std::string> foreign_names;
  for (const DirCheckpoint& c : foreign) foreign_names.push_back(c.path.filename().string());
  if (!foreign.empty() && !ck.overwrite) {
    const std::string choices =
        ck.resume ? "a new directory for this branch (--set checkpoint.dir=DIR), or "
                    "checkpoint.overwrite = true to remove them"
                  : "resume that run (--set checkpoint.resume=true), a new directory "
                    "(--set checkpoint.dir=DIR), or checkpoint.overwrite = true to remove them";
    throw UserError(fmt::format(
        "checkpoint.dir '{}' holds checkpoints of another run after step {}: {} ({}); this run "
        "would replace or prune them. Choose: {}",
        ck.dir, start, name_list(foreign_names), foreign.front().foreign, choices));
  }
  if (!foreign.empty()) {
    if (!quiet) {
      std::printf("zerolap: checkpoint.overwrite = true: removing %zu checkpoint%s of another run "
                  "from '%s': %s\n",
                  foreign.size(), foreign.size() == 1 ? "" : "s", ck.dir.c_str(),
                  name_list(foreign_names).c_str());
    }
    remove_checkpoints(ck.dir, foreign);
  } else if (start > 0 && !later.empty() && !quiet) {
    std::vector<std::string> names;
    for (const DirCheckpoint& c : later) names.push_back(c.path.filename().string());
    std::printf("zerolap: note: resuming from step %lld, before the newest checkpoint: this run "
                "(the same config and world size) replaces %s as it reaches those steps\n",
                static_cast<long long>(start), name_list(names).c_str());
  }

  // output.dir: a continuation (resumed from the newest checkpoint) extends its files.
  const bool continuation = start > 0 && later.empty();
  if (continuation) return;
  std::vector<std::string> present;
  for (const char* name : kOutputFiles) {
    if (fs::exists(fs::path(config.output.dir) / name, ec)) present.push_back(name);
  }
  if (present.empty()) return;
  const fs::path saved = fs::path(config.output.dir) / "config.toml";
  std::string why = "no config.toml says which run wrote them";
  if (fs::exists(saved, ec) && !fs::is_regular_file(saved, ec)) {
    why = "config.toml is not a regular file";  // a FIFO or a device is never read
  } else if (fs::exists(saved, ec)) {
    const auto keys = result_differences(
        read_small_file(saved.string(), "saved config", kMaxSavedConfigBytes), run_toml);
    if (keys.empty()) return;  // the same command again: it replaces its own outputs
    why = differences_text(keys);
  }
  if (!config.output.overwrite) {
    throw UserError(fmt::format(
        "output.dir '{}' holds the outputs of another run ({}; {}); this run would overwrite "
        "them. Choose: resume that run (--set checkpoint.resume=true, with its checkpoint.dir), "
        "a new directory (--set output.dir=DIR), or output.overwrite = true to replace them",
        config.output.dir, name_list(present), why));
  }
  if (!quiet) {
    std::printf("zerolap: output.overwrite = true: replacing %s in '%s' (%s)\n",
                name_list(present).c_str(), config.output.dir.c_str(), why.c_str());
  }
}

void check_bench_outputs(const Config& config, int world_size, bool quiet) {
  std::vector<std::string> present;
  std::error_code ec;
  for (const char* name : kBenchFiles) {
    if (fs::exists(fs::path(config.output.dir) / name, ec)) present.push_back(name);
  }
  if (present.empty()) return;
  const fs::path saved = fs::path(config.output.dir) / "bench.json";
  std::string why = "no bench.json says which run wrote them";
  if (fs::exists(saved, ec) && !fs::is_regular_file(saved, ec)) {
    why = "bench.json is not a regular file";  // a FIFO or a device is never read
  } else if (fs::exists(saved, ec)) {
    const nlohmann::json j = nlohmann::json::parse(
        read_small_file(saved.string(), "saved bench results", kMaxSavedConfigBytes), nullptr,
        /*allow_exceptions=*/false);
    const auto field = [&](const char* key) {
      return j.is_object() && j.contains(key) ? j[key] : nlohmann::json();
    };
    if (!field("effective_config").is_string() || !field("world_size").is_number_integer()) {
      why = "bench.json does not record the config that wrote it";
    } else if (field("world_size").get<std::int64_t>() != world_size) {
      why = fmt::format("bench.json was written on {} ranks, this bench has {}",
                        field("world_size").get<std::int64_t>(), world_size);
    } else {
      const auto keys =
          result_differences(field("effective_config").get<std::string>(), to_toml(config));
      if (keys.empty()) return;  // the same command again: it replaces its own outputs
      why = differences_text(keys);
    }
  }
  if (!config.output.overwrite) {
    throw UserError(fmt::format(
        "output.dir '{}' holds the results of another bench ({}; {}); this bench would overwrite "
        "them. Choose: a new directory (--set output.dir=DIR), or output.overwrite = true to "
        "replace them",
        config.output.dir, name_list(present), why));
  }
  if (!quiet) {
    std::printf("zerolap: output.overwrite = true: replacing %s in '%s' (%s)\n",
                name_list(present).c_str(), config.output.dir.c_str(), why.c_str());
  }
}

}  // namespace zl
