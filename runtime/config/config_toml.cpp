// The canonical TOML of a Config (every key, fixed order, defaults filled in), its hash and how
// two such texts differ, plus the enum names. Contract: parse_config(to_toml(c)) == c, and floats
// are written as the shortest text that reads back to the same value, so the hash changes only
// when a value does.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <map>
#include <optional>
#include <sstream>
#include <string>

#include "base/regular_file.h"
#include "runtime/config/config.h"
#include "runtime/config/config_names.h"

namespace zl {

using namespace config_detail;

namespace {

std::string toml_string(std::string_view s) {
  constexpr std::pair<char, const char*> kEscapes[] = {
      {'"', "\\\""}, {'\\', "\\\\"}, {'\n', "\\n"}, {'\t', "\\t"}, {'\r', "\\r"}};
  std::string out = "\"";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    const auto* escape = std::find_if(std::begin(kEscapes), std::end(kEscapes),
                                      [&](const auto& e) { return e.first == ch; });
    if (escape != std::end(kEscapes)) {
      out += escape->second;
    } else if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\u{:04X}", static_cast<unsigned>(c));
    } else {
      out += ch;  // UTF-8 passes through: TOML strings are UTF-8
    }
  }
  return out + "\"";
}

class TomlWriter {
 public:
  void section(std::string_view name) {
    if (!out_.empty()) out_ += '\n';
    out_ += fmt::format("[{}]\n", name);
  }
  void raw(std::string_view key, std::string_view text) {
    out_ += fmt::format("{} = {}\n", key, text);
  }
  void integer(std::string_view key, std::integral auto v) { raw(key, fmt::format("{}", v)); }
  void number(std::string_view key, std::floating_point auto v) { raw(key, float_text(v)); }
  void boolean(std::string_view key, bool v) { raw(key, v ? "true" : "false"); }
  void string(std::string_view key, std::string_view v) { raw(key, toml_string(v)); }
  template <class T, class Format>
  void array(std::string_view key, const std::vector<T>& values, Format format) {
    std::vector<std::string> items;
    for (const auto& v : values) items.push_back(format(v));
    raw(key, fmt::format("[{}]", fmt::join(items, ", ")));
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

// One line of a to_toml text: for a `key = value` line its full key ("section.key") and value;
// for a section header, a blank line or a '#' comment both empty.
struct TomlLine {
  std::string text, key, value;
};

// The lines of a to_toml text (this run's, or a saved one such as a checkpoint's), in order.
std::vector<TomlLine> toml_lines(const std::string& toml) {
  std::vector<TomlLine> out;
  std::istringstream lines(toml);
  std::string line, section;
  while (std::getline(lines, line)) {
    TomlLine& l = out.emplace_back(TomlLine{line, "", ""});
    if (line.starts_with('[')) {
      section = line.substr(1, line.find(']') - 1);
    } else if (const auto eq = line.find(" = "); eq != std::string::npos && line[0] != '#') {
      l.key = section + "." + line.substr(0, eq);
      l.value = line.substr(eq + 3);
    }
  }
  return out;
}

}  // namespace

const char* to_string(ParallelMode m) { return enum_name(kParallelModeNames, m); }
const char* to_string(Overlap o) { return enum_name(kOverlapNames, o); }
const char* to_string(CheckpointFormat f) { return enum_name(kCheckpointFormatNames, f); }
const char* to_string(CollectiveKind c) { return enum_name(kCollectiveNames, c); }

const char* to_string(AssignmentPolicy a) { return enum_name(kAssignmentNames, a); }
const char* to_string(OptimizerKind k) { return enum_name(kOptimizerKindNames, k); }
const char* to_string(DataKind k) { return enum_name(kDataKindNames, k); }
const char* to_string(LrSchedule s) { return enum_name(kLrScheduleNames, s); }
const char* to_string(DeviceChoice d) { return enum_name(kDeviceNames, d); }
const char* to_string(CommPriority p) { return enum_name(kCommPriorityNames, p); }
const char* to_string(ComputePrecision c) { return enum_name(kComputeNames, c); }
const char* to_string(MasterWeights m) { return enum_name(kMasterWeightsNames, m); }
const char* to_string(OnNonfinite o) { return enum_name(kOnNonfiniteNames, o); }

// Keys in the order of the structs in config.h; source_path and key_locations are left out on
// purpose: the same settings read from another file are the same run (and hash the same).
std::string to_toml(const Config& c) {
  TomlWriter w;
  const auto as_float = [](auto v) { return float_text(v); };

  w.section("model");
  w.string("kind", enum_name(kModelKindNames, c.model.kind));
  w.array("widths", c.model.widths, [](std::int64_t v) { return fmt::format("{}", v); });
  w.string("activation", enum_name(kActivationNames, c.model.activation));
  w.integer("seed", c.model.seed);
  w.number("layernorm_eps", c.model.layernorm_eps);

  const DataConfig& d = c.data;
  w.section("data");
  w.string("kind", enum_name(kDataKindNames, d.kind));
  w.string("path", d.path);
  w.string("train_images", d.train_images);
  w.string("train_labels", d.train_labels);
  w.string("test_images", d.test_images);
  w.string("test_labels", d.test_labels);
  // As configured (global_batch.h): the derived split is the world size's, not the config's.
  w.integer("batch_size", d.configured_batch_size > 0 ? d.configured_batch_size : d.batch_size);
  w.integer("eval_batch_size", d.eval_batch_size);
  w.integer("global_batch_size", d.global_batch_size);
  w.boolean("shuffle", d.shuffle);
  w.integer("seed", d.seed);
  w.integer("train_samples", d.train_samples);
  w.integer("test_samples", d.test_samples);
  w.number("noise", d.noise);
  w.integer("teacher_hidden", d.teacher_hidden);
  w.string("teacher_task", enum_name(kTaskKindNames, d.teacher_task));

  const OptimizerConfig& o = c.optimizer;
  w.section("optimizer");
  w.string("kind", to_string(o.kind));
  w.number("lr", o.lr);
  w.array("betas", std::vector<float>{o.beta1, o.beta2}, as_float);
  w.number("eps", o.eps);
  w.number("weight_decay", o.weight_decay);
  w.number("momentum", o.momentum);
  w.number("dampening", o.dampening);
  w.boolean("nesterov", o.nesterov);
  w.string("schedule", to_string(o.schedule));
  w.integer("warmup_steps", o.warmup_steps);
  w.number("min_lr", o.min_lr);

  const ParallelConfig& p = c.parallel;
  w.section("parallel");
  w.string("mode", to_string(p.mode));
  w.string("overlap", to_string(p.overlap));
  w.string("collective", to_string(p.collective));
  w.string("assignment", to_string(p.assignment));
  w.integer("zero_stage", p.zero_stage);
  w.integer("prefetch", p.prefetch);
  w.boolean("reshard_after_forward", p.reshard_after_forward);
  w.integer("shard_group", p.shard_group);
  w.number("bucket_cap_mb", p.bucket_cap_mb);
  w.number("first_bucket_cap_mb", p.first_bucket_cap_mb);

  w.section("precision");
  w.string("compute", to_string(c.precision.compute));
  w.string("reduce_dtype", enum_name(kReduceDtypeNames, c.precision.reduce_dtype));
  w.string("master_weights", to_string(c.precision.master_weights));

  const TrainConfig& t = c.train;
  w.section("train");
  w.integer("steps", t.steps);
  w.integer("epochs", t.epochs);
  w.integer("log_every", t.log_every);
  w.integer("eval_every", t.eval_every);
  w.integer("grad_accum", c.data.configured_grad_accum > 0 ? c.data.configured_grad_accum
                                                           : t.grad_accum);
  w.number("clip_grad_norm", t.clip_grad_norm);
  w.string("on_nonfinite", to_string(t.on_nonfinite));
  w.number("max_loss", t.max_loss);
  w.integer("max_consecutive_skips", t.max_consecutive_skips);

  const CheckpointConfig& k = c.checkpoint;
  w.section("checkpoint");
  w.string("dir", k.dir);
  w.integer("every", k.every);
  w.integer("keep", k.keep);
  if (k.resume && !k.resume_path.empty()) {
    w.string("resume", k.resume_path);
  } else {
    w.boolean("resume", k.resume);
  }
  w.boolean("overwrite", k.overwrite);
  w.string("format", to_string(k.format));
  w.boolean("async", k.async);

  w.section("runtime");
  w.string("device", to_string(c.runtime.device));
  if (c.runtime.threads == kAutoThreads) {
    w.string("threads", "auto");
  } else {
    w.integer("threads", c.runtime.threads);
  }
  w.number("timeout_s", c.runtime.timeout_s);
  w.number("memory_limit_mb", c.runtime.memory_limit_mb);
  w.string("comm_priority", to_string(c.runtime.comm_priority));

  const BenchConfig& b = c.bench;
  w.section("bench");
  w.array("modes", b.modes, toml_string);
  w.array("bucket_cap_mb", b.bucket_cap_mb, as_float);
  w.array("precision", b.precision, [](ComputePrecision p) { return toml_string(to_string(p)); });
  w.integer("warmup", b.warmup);
  w.integer("steps", b.steps);
  w.integer("rounds", b.rounds);

  w.section("link");
  w.number("bandwidth_gbps", c.link.bandwidth_gbps);
  w.number("latency_us", c.link.latency_us);
  w.integer("ranks", c.link.ranks);
  w.integer("node_ranks", c.link.node_ranks);
  w.number("intra_gbps", c.link.intra_gbps);

  w.section("output");
  w.string("dir", c.output.dir);
  w.boolean("trace", c.output.trace);
  w.integer("trace_steps", c.output.trace_steps);
  w.boolean("overwrite", c.output.overwrite);
  return w.take();
}

bool key_affects_results(const std::string& key) {
  const auto in_section = [&](const char* section) { return key.rfind(section, 0) == 0; };
  return !in_section("checkpoint.") && !in_section("output.") && key != "runtime.timeout_s" &&
         key != "runtime.comm_priority" && key != "runtime.memory_limit_mb";
}

std::vector<std::pair<std::string, std::string>> result_entries(const Config& config) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const TomlLine& l : toml_lines(to_toml(config))) {
    if (!l.key.empty() && key_affects_results(l.key)) out.emplace_back(l.key, l.value);
  }
  return out;
}

std::vector<std::string> result_differences(const std::string& a_toml, const std::string& b_toml) {
  // Every key of either text, in key order, with its value in each (none where it is absent).
  std::map<std::string, std::pair<std::optional<std::string>, std::optional<std::string>>> values;
  for (const TomlLine& l : toml_lines(a_toml)) {
    if (!l.key.empty()) values[l.key].first = l.value;
  }
  for (const TomlLine& l : toml_lines(b_toml)) {
    if (!l.key.empty()) values[l.key].second = l.value;
  }
  std::vector<std::string> differ;
  for (const auto& [key, in_a_and_b] : values) {
    // A key may come from a checkpoint's or a saved config's text: escaped and bounded, as in
    // every message that echoes a file.
    if (in_a_and_b.first != in_a_and_b.second && key_affects_results(key)) {
      differ.push_back(escaped_excerpt(key));
    }
  }
  return differ;
}

std::string config_hash(const Config& config) {
  std::uint64_t h = 14695981039346656037ull;  // FNV-1a 64 offset basis
  for (const TomlLine& l : toml_lines(to_toml(config))) {
    if (!l.key.empty() && !key_affects_results(l.key)) continue;
    for (const char ch : l.text + '\n') {
      h ^= static_cast<unsigned char>(ch);
      h *= 1099511628211ull;  // FNV-1a 64 prime
    }
  }
  return fmt::format("{:016x}", h);
}

}  // namespace zl
