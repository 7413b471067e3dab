// Loads a run configuration: TOML text -> `--set` overrides applied to the parsed table -> every
// section read with type and range checks -> cross-key checks. Overrides go in before any check,
// so a bad `--set` value fails exactly like a bad line in the file (but names `--set key`).
#include "runtime/config/config.h"
#include "runtime/config/mode.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <toml++/toml.h>

#include <algorithm>
#include <regex>
#include <string_view>

#include "base/errors.h"
#include "base/regular_file.h"
#include "runtime/config/config_limits.h"
#include "runtime/config/config_reader.h"
#include "runtime/config/config_sizes.h"
#include "runtime/config/toml_key_parts.h"

namespace zl {

using namespace config_detail;

namespace {

// The first element of `values` equal to an earlier one; null when each is there once.
template <class T>
const T* first_repeat(const std::vector<T>& values) {
  for (auto it = values.begin(); it != values.end(); ++it) {
    if (std::find(values.begin(), it, *it) != it) return &*it;
  }
  return nullptr;
}

toml::table parse_document(const std::string& text, const std::string& source_name) {
  try {
    return parse_guarded(text, source_name);
  } catch (const toml::parse_error& e) {
    throw UserError(fmt::format("{}:{}: TOML syntax error: {}", source_name, e.source().begin.line,
                                escaped_excerpt(e.description(), 200)));
  }
}

std::string_view trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

// Whether `s` is well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, at most
// U+10FFFF), as TOML requires of every file, so of the config.toml written from a run's config.
bool valid_utf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const auto lead = static_cast<unsigned char>(s[i]);
    const int extra = lead < 0x80 ? 0 : (lead >> 5) == 0x6 ? 1 : (lead >> 4) == 0xE ? 2
                                      : (lead >> 3) == 0x1E ? 3 : -1;
    if (extra < 0 || s.size() - i <= static_cast<std::size_t>(extra)) return false;
    std::uint32_t code = extra == 0 ? lead : lead & (0x3F >> extra);
    for (int k = 1; k <= extra; ++k) {
      const auto next = static_cast<unsigned char>(s[i + static_cast<std::size_t>(k)]);
      if ((next & 0xC0) != 0x80) return false;
      code = (code << 6) | (next & 0x3F);
    }
    static constexpr std::uint32_t kSmallest[] = {0, 0x80, 0x800, 0x10000};
    if (code < kSmallest[extra] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) {
      return false;
    }
    i += static_cast<std::size_t>(extra) + 1;
  }
  return true;
}

// Puts `value` (TOML text) at `section.key` of `root` (replacing or inserting), set by the flag
// `label` ("--set optimizer.lr", "--link-gbps"). The value is read as TOML ("3e-4",
// "[784, 512, 10]", "true", "\"x\""); what does not read as exactly one TOML value is a bare
// string, so `--set parallel.overlap=interleaved` needs no quotes, unless it opens a TOML string,
// array or table (a missing quote or bracket is an error).
void apply_value(toml::table& root, const std::string& key, const std::string& value,
                 const std::string& label, ConfigSource& source) {
  const auto dot = key.find('.');
  const std::string section = key.substr(0, dot), name = key.substr(dot + 1);
  toml::table* target = nullptr;
  if (toml::node* existing = root.get(section)) {
    target = existing->as_table();
    if (target == nullptr) {
      throw UserError(
          fmt::format("{}: '{}' is not a section in {}", label, section, source.name()));
    }
  } else {
    target = root.insert_or_assign(section, toml::table{}).first->second.as_table();
    source.mark_override(section, label);  // an unknown section is reported at the flag
  }

  bool inserted = false;
  // The value is read as TOML text: a key can come only in an inline table or on a line of its
  // own. A bare string's dots (runs/lr.1e-3.bs.64...) are no key's.
  if (value.find_first_of("{\n") != std::string::npos) check_key_parts(value, label);
  try {
    const toml::table parsed = toml::parse("v = " + value, label);
    if (parsed.size() == 1 && parsed.get("v") != nullptr) {
      parsed.get("v")->visit([&](const auto& node) { target->insert_or_assign(name, node); });
      inserted = true;
    }
  } catch (const toml::parse_error& e) {
    // A value that opens a TOML string, array or table was meant as one: a missing quote or
    // bracket is an error, not a bare string beginning with it.
    if (!value.empty() && std::string_view("\"'[{").find(value[0]) != std::string_view::npos) {
      throw UserError(fmt::format("{}: {} is not a TOML value ({}); a string needs both quotes, "
                                  "an array both brackets",
                                  label, escaped_excerpt(value, 60, Quotes::AsIs),
                                  escaped_excerpt(e.description(), 120, Quotes::AsIs)));
    }
    // Not a TOML value: a bare string, unless it is a decimal integer beyond 64 bits (TOML's
    // digits, no leading zero, more than the 19 of the int64 bounds or above them).
    const bool negative = !value.empty() && value[0] == '-';
    const std::string_view digits =
        std::string_view(value).substr(!value.empty() && (negative || value[0] == '+') ? 1 : 0);
    const std::string_view bound = negative ? "9223372036854775808" : "9223372036854775807";
    if (!digits.empty() && digits[0] != '0' &&
        digits.find_first_not_of("0123456789") == std::string_view::npos &&
        (digits.size() > bound.size() || (digits.size() == bound.size() && digits > bound))) {
      throw UserError(fmt::format("{}: {} is beyond a 64-bit integer (at {}{})", label,
                                  escaped_excerpt(value, 40), negative ? "least -" : "most ",
                                  bound));
    }
    // Nor a TOML float that does not read as a double (1e400): it was taken for a string, and
    // a number key then said "expected a number, got string". TOML's float: an integer part,
    // then a fraction and maybe an exponent, or an exponent.
    static const std::string part = "[0-9](_?[0-9])*", exponent = "[eE][+-]?" + part;
    static const std::regex toml_float("[+-]?(0|[1-9](_?[0-9])*)((\\." + part + ")(" + exponent +
                                       ")?|" + exponent + ")");
    if (std::regex_match(value, toml_float)) {
      throw UserError(fmt::format("{}: {} is beyond a 64-bit float's range (magnitudes up to "
                                  "1.8e308, down to 4.9e-324)",
                                  label, escaped_excerpt(value, 40)));
    }
  }
  if (!inserted) {
    if (!valid_utf8(value)) {
      throw UserError(fmt::format("{}: the value is not valid UTF-8 (TOML text is UTF-8)", label));
    }
    target->insert_or_assign(name, value);
  }
  source.mark_override(key, label, value);
}

// `--set section.key=value`.
void apply_override(toml::table& root, const std::string& item, ConfigSource& source) {
  const auto eq = item.find('=');
  const std::string key(trim(std::string_view(item).substr(0, std::min(eq, item.size()))));
  const auto dot = key.find('.');
  if (eq == std::string::npos || dot == std::string::npos || dot == 0 || dot + 1 == key.size() ||
      key.find('.', dot + 1) != std::string::npos) {
    throw UserError(
        fmt::format("--set '{}': expected section.key=value (e.g. --set optimizer.lr=3e-4)",
                    escaped_excerpt(item, 120, Quotes::AsIs)));
  }
  const std::string value(trim(std::string_view(item).substr(eq + 1)));
  apply_value(root, key, value, "--set " + key, source);
}

void apply_overrides(toml::table& root, const std::vector<std::string>& overrides,
                     const std::vector<FlagOverride>& flags, ConfigSource& source) {
  for (const auto& item : overrides) apply_override(root, item, source);
  for (const FlagOverride& f : flags) apply_value(root, f.key, f.value, f.flag, source);
  // train.steps and train.epochs are alternatives: overriding one replaces the file's other, so
  // `--set train.steps=100` shortens an epochs-based config instead of conflicting with it.
  const bool steps = source.is_override("train.steps"), epochs = source.is_override("train.epochs");
  if (auto* train = root["train"].as_table(); train != nullptr && steps != epochs) {
    train->erase(steps ? "epochs" : "steps");
  }
}

void check_sections(const toml::table& root, const ConfigSource& source) {
  const std::vector<std::string> names{"model",     "data",  "optimizer",  "parallel",
                                       "precision", "train", "checkpoint", "runtime",
                                       "bench",     "link",  "output"};
  for (const auto& [key, node] : root) {
    const std::string name(key.str());
    const std::string where = source.location(name, &node);
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      if (!node.is_table()) {
        throw UserError(fmt::format(
            "{}: unknown key '{}' at the top level: keys belong under a section header such as "
            "[optimizer] (sections: {})",
            where, escaped_excerpt(name), fmt::join(names, ", ")));
      }
      throw UserError(fmt::format("{}: unknown section [{}]{}", where, escaped_excerpt(name),
                                  did_you_mean(name, names, "[", "]")));
    }
    if (!node.is_table()) {
      throw UserError(fmt::format("{}: '{}' must be a section [{}], got {}", where, name,
                                  name, type_name(node)));
    }
  }
}

void read_model(const toml::table& root, ConfigSource& source, ModelSpec& m) {
  SectionReader r(source, root, "model");
  r.enumeration("kind", m.kind, kModelKindNames);
  r.integer_array("widths", m.widths);
  r.enumeration("activation", m.activation, kActivationNames);
  r.integer("seed", m.seed);
  r.number("layernorm_eps", m.layernorm_eps, above(0));
  r.finish();
  if (!r.has("widths")) {
    source.fail("model.widths", "is required: the layer widths, e.g. widths = [784, 256, 10]");
  }
  try {
    validate_model_spec(m);
  } catch (const UserError& e) {
    source.fail("model.widths", e.what());
  }
}

void read_data(const toml::table& root, ConfigSource& source, DataConfig& d) {
  SectionReader r(source, root, "data");
  r.enumeration("kind", d.kind, kDataKindNames);
  r.path("path", d.path);
  r.path("train_images", d.train_images);
  r.path("train_labels", d.train_labels);
  r.path("test_images", d.test_images);
  r.path("test_labels", d.test_labels);
  r.integer("batch_size", d.batch_size, closed(1, kMaxSampleCount));
  r.integer("eval_batch_size", d.eval_batch_size, closed(1, kMaxSampleCount));
  r.integer("global_batch_size", d.global_batch_size, closed(0, kMaxSampleCount));
  r.boolean("shuffle", d.shuffle);
  r.integer("seed", d.seed);
  r.integer("train_samples", d.train_samples, closed(1, kMaxSampleCount));
  r.integer("test_samples", d.test_samples, closed(1, kMaxSampleCount));
  r.number("noise", d.noise, at_least(0));
  r.integer("teacher_hidden", d.teacher_hidden, closed(1, kMaxSampleCount));
  r.enumeration("teacher_task", d.teacher_task, kTaskKindNames);
  r.finish();

  if (d.kind == DataKind::FashionMnist && d.path.empty()) {
    source.fail("data.path", "must name the Fashion-MNIST directory for kind = \"fashion_mnist\"");
  }
  if (d.kind == DataKind::Idx) {
    std::vector<std::string> missing;
    const std::pair<const char*, const std::string*> paths[] = {{"train_images", &d.train_images},
                                                                {"train_labels", &d.train_labels},
                                                                {"test_images", &d.test_images},
                                                                {"test_labels", &d.test_labels}};
    for (const auto& [name, value] : paths) {
      if (value->empty()) missing.emplace_back(fmt::format("data.{}", name));
    }
    if (!missing.empty()) {
      source.fail("data.kind", fmt::format("\"idx\" needs the four IDX files data.train_images, "
                                           "data.train_labels, data.test_images and "
                                           "data.test_labels (missing: {})",
                                           fmt::join(missing, ", ")));
    }
  }
}

// The data decides the model's input and output widths; catching a mismatch here turns a shape
// error deep in the first forward into a message about the config.
void check_model_fits_data(const Config& c, const ConfigSource& source) {
  const auto& w = c.model.widths;
  if (w.empty()) return;
  const auto require = [&](bool holds, const char* what) {
    if (!holds) source.fail("model.widths", fmt::format("{}, got [{}]", what, fmt::join(w, ", ")));
  };
  require(c.data.kind != DataKind::FashionMnist || (w.front() == 784 && w.back() >= 10),
          "data.kind = \"fashion_mnist\" needs 784 inputs and at least 10 outputs (28x28 images, "
          "10 classes)");
  require(c.data.kind != DataKind::Spirals || (w.front() == 2 && w.back() >= 2),
          "data.kind = \"spirals\" needs 2 inputs and at least 2 outputs (one per class)");
  require(c.data.kind != DataKind::Teacher || c.data.teacher_task != TaskKind::Classification ||
              w.back() >= 2,
          "a teacher classification task needs at least 2 outputs (one per class)");
}

void read_optimizer(const toml::table& root, ConfigSource& source, OptimizerConfig& o) {
  SectionReader r(source, root, "optimizer");
  r.enumeration("kind", o.kind, kOptimizerKindNames);
  r.number("lr", o.lr, above(0));
  std::vector<float> betas;
  r.number_array("betas", betas, half_open(0, 1), 2, false);
  if (betas.size() == 2) {
    o.beta1 = betas[0];
    o.beta2 = betas[1];
  }
  r.number("eps", o.eps, above(0));
  r.number("weight_decay", o.weight_decay, at_least(0));
  r.number("momentum", o.momentum, at_least(0));
  r.number("dampening", o.dampening, closed(0, 1));
  r.boolean("nesterov", o.nesterov);
  r.enumeration("schedule", o.schedule, kLrScheduleNames);
  r.integer("warmup_steps", o.warmup_steps, at_least(0));
  r.number("min_lr", o.min_lr, at_least(0));
  r.finish();

  if (o.min_lr > o.lr) {
    source.fail("optimizer.min_lr",
                fmt::format("must be in [0, lr] (got {}, optimizer.lr = {})", o.min_lr, o.lr));
  }
  if (o.nesterov && (o.momentum <= 0.0f || o.dampening != 0.0f)) {
    source.fail("optimizer.nesterov",
                fmt::format("requires momentum > 0 and dampening = 0, as torch.optim.SGD "
                            "(got momentum = {}, dampening = {})",
                            o.momentum, o.dampening));
  }
}

void read_parallel(const toml::table& root, ConfigSource& source, ParallelConfig& p) {
  SectionReader r(source, root, "parallel");
  r.enumeration("mode", p.mode, kParallelModeNames);
  r.enumeration("overlap", p.overlap, kOverlapNames);
  r.enumeration("collective", p.collective, kCollectiveNames);
  r.enumeration("assignment", p.assignment, kAssignmentNames);
  r.integer("zero_stage", p.zero_stage, closed(1, 3));
  r.integer("prefetch", p.prefetch, closed(0, kMaxPrefetch));
  r.boolean("reshard_after_forward", p.reshard_after_forward);
  r.integer("shard_group", p.shard_group, closed(0, kMaxWorldSize));
  r.number("bucket_cap_mb", p.bucket_cap_mb, open_closed(0, kMaxBucketCapMb));
  r.number("first_bucket_cap_mb", p.first_bucket_cap_mb, open_closed(0, kMaxBucketCapMb));
  r.finish();
}

void read_precision(const toml::table& root, ConfigSource& source, PrecisionConfig& p) {
  SectionReader r(source, root, "precision");
  r.enumeration("compute", p.compute, kComputeNames);
  r.enumeration("reduce_dtype", p.reduce_dtype, kReduceDtypeNames);
  r.enumeration("master_weights", p.master_weights, kMasterWeightsNames);
  r.finish();
  if (p.master_weights == MasterWeights::Remainders && p.compute != ComputePrecision::Bf16) {
    source.fail("precision.master_weights",
                fmt::format("\"remainders\" keeps the 16 bits a bf16 parameter drops, so it needs "
                            "compute = \"bf16\" (got compute = \"{}\"); use master_weights = "
                            "\"fp32\"",
                            to_string(p.compute)));
  }
  if (p.reduce_dtype == DType::BF16 && p.compute != ComputePrecision::Bf16) {
    source.fail("precision.reduce_dtype",
                fmt::format("\"bf16\" rounds bf16 gradients for the wire, so it needs compute = "
                            "\"bf16\" (got compute = \"{}\"); use reduce_dtype = \"fp32\"",
                            to_string(p.compute)));
  }
}

void read_train(const toml::table& root, ConfigSource& source, TrainConfig& t) {
  SectionReader r(source, root, "train");
  const bool has_steps = r.has("steps"), has_epochs = r.has("epochs");
  r.integer("steps", t.steps, at_least(0));
  r.integer("epochs", t.epochs, at_least(0));
  r.integer("log_every", t.log_every, at_least(1));
  r.integer("eval_every", t.eval_every, at_least(0));
  r.integer("grad_accum", t.grad_accum, closed(1, kMaxGradAccum));
  r.number("clip_grad_norm", t.clip_grad_norm, at_least(0));
  r.enumeration("on_nonfinite", t.on_nonfinite, kOnNonfiniteNames);
  r.number("max_loss", t.max_loss, at_least(0));
  r.integer("max_consecutive_skips", t.max_consecutive_skips, closed(1, kMaxConsecutiveSkips));
  r.finish();

  // Neither key given: one epoch. The struct's 0/0 means "no training" (write the initial
  // checkpoint), which must be asked for explicitly (steps = 0 or epochs = 0), never by omission.
  if (!has_steps && !has_epochs) t.epochs = 1;
  if (t.steps > 0 && t.epochs > 0) {
    source.fail("train.steps",
                fmt::format("set either steps or epochs, not both (steps = {}, epochs = {} at {})",
                            t.steps, t.epochs, source.location("train.epochs")));
  }
}

void read_checkpoint(const toml::table& root, ConfigSource& source, CheckpointConfig& c) {
  SectionReader r(source, root, "checkpoint");
  r.path("dir", c.dir);
  r.integer("every", c.every, at_least(0));
  r.integer("keep", c.keep, at_least(1));
  if (const toml::node* node = r.get("resume")) {
    if (const auto* b = node->as_boolean()) {
      c.resume = b->get();
      c.resume_path.clear();
    } else if (const auto* s = node->as_string()) {
      if (s->get().empty()) {
        r.fail("resume",
               "an empty path; use resume = true for the latest checkpoint in checkpoint.dir",
               node);
      }
      r.check_path("resume", s->get(), *node);
      c.resume = true;
      c.resume_path = s->get();
    } else {
      r.type_error("resume", *node, "true, false or a checkpoint path");
    }
  }
  r.boolean("overwrite", c.overwrite);
  r.enumeration("format", c.format, kCheckpointFormatNames);
  r.boolean("async", c.async);
  r.finish();
  if (c.async && c.format != CheckpointFormat::Sharded) {
    source.fail("checkpoint.async",
                "true needs checkpoint.format = \"sharded\" (each rank writes its own shard in the "
                "background; a single file is written by rank 0 synchronously)");
  }
  if (c.resume && c.resume_path.empty() && c.dir.empty()) {
    source.fail("checkpoint.resume",
                "true needs checkpoint.dir (to find the latest checkpoint "
                "there) or a path: resume = \"<file>.safetensors\"");
  }
}

void read_runtime(const toml::table& root, ConfigSource& source, RuntimeConfig& rt) {
  SectionReader r(source, root, "runtime");
  r.enumeration("device", rt.device, kDeviceNames);
  // An integer >= 1, or "auto": the rank's share of its node's CPUs (World::cpus_per_rank).
  if (const toml::node* node = r.get("threads")) {
    const auto* text = node->as_string();
    if (text != nullptr && text->get() == "auto") {
      rt.threads = kAutoThreads;
    } else if (const auto* v = node->as_integer()) {
      if (v->get() < 1 || v->get() > kMaxCpuThreads) {
        r.fail("threads",
               fmt::format("must be in [1, {}] or \"auto\" (got {}): the OpenMP team of one "
                           "rank's GEMMs and kernels, one library thread per member, and more "
                           "than {} is more than any CPU node has hardware threads",
                           kMaxCpuThreads, v->get(), kMaxCpuThreads),
               node);
      }
      rt.threads = static_cast<int>(v->get());
    } else {
      r.type_error("threads", *node, "an integer >= 1 or \"auto\"");
    }
  }
  r.number("timeout_s", rt.timeout_s, closed(kMinTimeoutS, kMaxTimeoutS));
  r.enumeration("comm_priority", rt.comm_priority, kCommPriorityNames);
  r.number("memory_limit_mb", rt.memory_limit_mb, closed(0, kMaxMemoryLimitMb));
  r.finish();
}

void read_bench(const toml::table& root, ConfigSource& source, BenchConfig& b) {
  SectionReader r(source, root, "bench");
  // The names are checked against the train section in check_bench_modes.
  r.string_array("modes", b.modes);
  if (const std::string* mode = first_repeat(b.modes)) {
    source.fail("bench.modes", fmt::format("\"{}\" is listed twice", escaped_excerpt(*mode)));
  }
  r.number_array("bucket_cap_mb", b.bucket_cap_mb, open_closed(0, kMaxBucketCapMb), 0, true);
  if (const double* cap = first_repeat(b.bucket_cap_mb)) {
    source.fail("bench.bucket_cap_mb", fmt::format("{:g} is listed twice", *cap));
  }
  r.enumeration_list("precision", b.precision, kComputeNames);
  r.integer("warmup", b.warmup, closed(0, kMaxBenchSteps));
  r.integer("steps", b.steps, closed(1, kMaxBenchSteps));
  r.integer("rounds", b.rounds, closed(1, kMaxBenchRounds));
  r.finish();
}

void read_link(const toml::table& root, ConfigSource& source, LinkConfig& l) {
  SectionReader r(source, root, "link");
  // Bounded so every modelled time stays a finite, castable duration (simulated_link.cpp): 0 or
  // 1 kb/s .. 1 Pb/s, and at most 10 s per hop.
  r.number("bandwidth_gbps", l.bandwidth_gbps, closed(0, kMaxLinkBandwidthGbps));
  r.number("latency_us", l.latency_us, closed(0, kMaxLinkLatencyUs));
  if (l.bandwidth_gbps > 0 && l.bandwidth_gbps < kMinLinkBandwidthGbps) {
    source.fail("link.bandwidth_gbps",
                fmt::format("{} is below the slowest link modelled, {} Gb/s (1 kb/s); use 0 for "
                            "no bandwidth limit",
                            l.bandwidth_gbps, kMinLinkBandwidthGbps));
  }
  r.integer("ranks", l.ranks, closed(0, kMaxWorldSize));
  r.integer("node_ranks", l.node_ranks, closed(0, kMaxWorldSize));
  r.number("intra_gbps", l.intra_gbps, closed(0, kMaxLinkBandwidthGbps));
  r.finish();
  if (l.ranks > 0 && !l.enabled()) {
    source.fail("link.ranks", fmt::format("{} ranks are timed on a modelled link, but "
                                          "link.bandwidth_gbps and link.latency_us are both 0 "
                                          "(no link); set one of them",
                                          l.ranks));
  }
  // Two tiers (Note [Link model]); whether node_ranks divides the world is check_link_world's.
  if (l.intra_gbps > 0 && l.node_ranks == 0) {
    source.fail("link.intra_gbps", fmt::format("{} Gb/s inside a modelled node, but no node: set "
                                               "link.node_ranks, the ranks of one node",
                                               l.intra_gbps));
  }
  if (l.node_ranks == 0) return;
  if (l.bandwidth_gbps == 0) {
    // 0 is an unlimited network, which no node's links could outrun; latency alone models no
    // tiers (both have the same latency).
    source.fail("link.node_ranks",
                fmt::format("nodes of {} ranks need link.bandwidth_gbps > 0, the bandwidth of "
                            "each rank between nodes (and link.intra_gbps inside one)",
                            l.node_ranks));
  }
  if (l.intra_gbps == 0) {
    source.fail("link.node_ranks",
                fmt::format("nodes of {} ranks need the bandwidth inside a node: set "
                            "link.intra_gbps (at least link.bandwidth_gbps = {})",
                            l.node_ranks, l.bandwidth_gbps));
  }
  if (l.intra_gbps < l.bandwidth_gbps) {
    source.fail("link.intra_gbps",
                fmt::format("{} Gb/s inside a node is below link.bandwidth_gbps = {} between "
                            "nodes (at {}): a node's links are at least as fast as its network "
                            "port; raise link.intra_gbps or lower link.bandwidth_gbps",
                            l.intra_gbps, l.bandwidth_gbps,
                            source.location("link.bandwidth_gbps")));
  }
}

void read_output(const toml::table& root, ConfigSource& source, OutputConfig& o) {
  SectionReader r(source, root, "output");
  r.path("dir", o.dir, /*allow_empty=*/false);
  r.boolean("trace", o.trace);
  r.integer("trace_steps", o.trace_steps, closed(0, kMaxBenchSteps));
  r.boolean("overwrite", o.overwrite);
  r.finish();
}

void check_parallel_with_train(const Config& c, const ConfigSource& source) {
  if (c.parallel.overlap != Overlap::None && c.parallel.mode == ParallelMode::Ddp) {
    source.fail("parallel.overlap",
                fmt::format("\"{}\" applies to mode = \"zero\" only (ddp steps the whole optimizer "
                            "on every rank after the last gradient is reduced); set "
                            "parallel.mode = \"zero\" or overlap = \"none\"",
                            to_string(c.parallel.overlap)));
  }
  if (c.parallel.collective != CollectiveKind::AllreduceBroadcast &&
      c.parallel.mode == ParallelMode::Ddp) {
    source.fail("parallel.collective",
                fmt::format("\"{}\" applies to mode = \"zero\" only (ddp all-reduces every "
                            "bucket, since every rank steps the whole optimizer); set "
                            "parallel.mode = \"zero\" or collective = \"allreduce_broadcast\"",
                            to_string(c.parallel.collective)));
  }
  // Stages 2 and 3 keep only the rank's shard, and a shard group keeps shards inside a group:
  // only an element-wise split has shards.
  const bool element_shards = c.parallel.mode == ParallelMode::Zero &&
                              c.parallel.collective == CollectiveKind::ReduceScatterAllgather;
  const auto require_element_shards = [&](const char* key, const std::string& what,
                                          const std::string& remedy) {
    const auto origin = [&](const std::string& k) {
      return source.was_set(k) ? "at " + source.location(k) : std::string("by default");
    };
    source.fail(key, fmt::format("{}, which needs parallel.mode = \"zero\" and "
                                 "parallel.collective = \"reduce_scatter_allgather\" (got mode = "
                                 "\"{}\" {}, collective = \"{}\" {}); set {} or that collective",
                                 what, to_string(c.parallel.mode), origin("parallel.mode"),
                                 to_string(c.parallel.collective), origin("parallel.collective"),
                                 remedy));
  };
  if (c.parallel.zero_stage >= 2 && !element_shards) {
    require_element_shards(
        "parallel.zero_stage",
        fmt::format("{} shards the {}", c.parallel.zero_stage,
                    c.parallel.zero_stage == 2 ? "gradients" : "parameters"),
        "zero_stage = 1");
  }
  if (c.parallel.shard_group > 0 && !element_shards) {
    require_element_shards(
        "parallel.shard_group",
        fmt::format("{} splits every bucket's element shards over groups of {} ranks",
                    c.parallel.shard_group, c.parallel.shard_group),
        "shard_group = 0");
  }
  // The link model times link.ranks / G replicas of the groups of G at any world size
  // (runtime/comm/link/simulated_link.h, link_span), so G divides link.ranks whatever the world;
  // check_shard_group holds the same for the bench's hybrid modes.
  const int group = c.parallel.shard_group;
  if (group > 0 && c.link.ranks > 0 && c.link.ranks % group != 0) {
    source.fail("link.ranks",
                fmt::format("{} is not a multiple of parallel.shard_group = {} (at {}): the link "
                            "model times a job in groups of {} ranks as link.ranks / {} replicas "
                            "of a group; set link.ranks to a multiple of {}, or 0 for the world "
                            "size",
                            c.link.ranks, group, source.location("parallel.shard_group"), group,
                            group, group));
  }
  if (c.parallel.overlap == Overlap::Interleaved && c.train.clip_grad_norm > 0.0f) {
    source.fail("parallel.overlap",
                fmt::format("\"interleaved\" cannot be combined with train.clip_grad_norm = {} "
                            "(at {}): an interleaved bucket's optimizer step runs as soon as its "
                            "own reduction completes, before the other buckets' gradients, and so "
                            "the global gradient norm, are known; use overlap = "
                            "\"after_backward\" or set train.clip_grad_norm = 0",
                            c.train.clip_grad_norm, source.location("train.clip_grad_norm")));
  }
  if (c.parallel.overlap == Overlap::Interleaved && c.train.on_nonfinite == OnNonfinite::SkipStep) {
    // docs/design.md, "Divergence": a skip must be decided before the first bucket steps.
    source.fail(
        "train.on_nonfinite",
        fmt::format("\"skip_step\" cannot be combined with parallel.overlap = "
                    "\"interleaved\" (at {}): an interleaved bucket's optimizer step runs "
                    "as soon as its own reduction completes, before the other buckets' "
                    "gradients, and so whether the step is finite, are known; use overlap = "
                    "\"after_backward\" or on_nonfinite = \"stop\"",
                    source.location("parallel.overlap")));
  }
}

// bench.modes names modes of all_modes() (mode.h); an interleaved one cannot clip or skip a step
// (the same reason as check_parallel_with_train's), so listing one then is an error here.
void check_bench_modes(const Config& c, const ConfigSource& source) {
  for (const std::string& name : c.bench.modes) {
    const std::optional<Mode> mode = parse_mode(name);
    if (!mode) {
      std::vector<std::string> known;
      for (const Mode& m : all_modes()) known.push_back(m.name());
      source.fail("bench.modes", fmt::format("unknown mode \"{}\"; the modes are \"{}\", and "
                                             "\"hsdp<stage>/<overlap>@<G>\" (stage 1-3, a shard "
                                             "group of G ranks)",
                                             escaped_excerpt(name),
                                             fmt::join(known, "\", \"")));
    }
    if (mode->overlap != Overlap::Interleaved) continue;
    const bool clips = c.train.clip_grad_norm > 0.0f;
    if (!clips && c.train.on_nonfinite != OnNonfinite::SkipStep) continue;
    source.fail(
        "bench.modes",
        fmt::format("lists \"{}\" but {} (at {}): interleaved overlap cannot {}; {} or drop "
                    "the interleaved modes",
                    name,
                    clips ? fmt::format("train.clip_grad_norm = {}", c.train.clip_grad_norm)
                          : std::string("train.on_nonfinite = \"skip_step\""),
                    source.location(clips ? "train.clip_grad_norm" : "train.on_nonfinite"),
                    clips ? "clip" : "skip a step",
                    clips ? "set train.clip_grad_norm = 0" : "set train.on_nonfinite = \"stop\""));
  }
}

// A config is a small text file: anything else (a device such as /dev/zero, a FIFO, a directory,
// a data file named by mistake) is refused up front rather than read forever or into memory.
constexpr std::int64_t kMaxConfigBytes = std::int64_t{1} << 20;

std::string read_file(const std::string& path) {
  try {
    return read_small_file(path, "config file", kMaxConfigBytes);
  } catch (const UserError& e) {
    const std::string what = e.what();
    if (what.find("is not a regular file") == std::string::npos) throw;
    throw UserError(what + ": give the path of a TOML file");
  }
}

Config read_config(const toml::table& root, ConfigSource& source, const std::string& source_name) {
  Config c;
  c.source_path = source_name;
  read_model(root, source, c.model);
  read_data(root, source, c.data);
  check_model_fits_data(c, source);
  read_optimizer(root, source, c.optimizer);
  read_parallel(root, source, c.parallel);
  read_precision(root, source, c.precision);
  read_train(root, source, c.train);
  read_checkpoint(root, source, c.checkpoint);
  read_runtime(root, source, c.runtime);
  read_bench(root, source, c.bench);
  read_link(root, source, c.link);
  read_output(root, source, c.output);
  check_parallel_with_train(c, source);
  // At any world size, so `zerolap config` refuses it too (global_batch.h).
  if (c.data.global_batch_size > 0 && c.train.grad_accum != 1) {
    source.fail("train.grad_accum",
                fmt::format("{} with data.global_batch_size = {} set: with a global batch, "
                            "train.grad_accum is derived; remove one of them",
                            c.train.grad_accum, c.data.global_batch_size));
  }
  check_derived_sizes(c, source);
  check_bench_modes(c, source);
  for (const std::string& key : source.known_keys()) c.key_locations[key] = source.location(key);
  return c;
}

}  // namespace

Config parse_config(const std::string& toml_text, const std::string& source_name,
                    const std::vector<std::string>& overrides,
                    const std::vector<FlagOverride>& flags) {
  ConfigSource source(source_name);
  toml::table root = parse_document(toml_text, source_name);
  apply_overrides(root, overrides, flags, source);
  check_sections(root, source);
  return read_config(root, source, source_name);
}

std::string where_set(const Config& config, const std::string& key) {
  const auto it = config.key_locations.find(key);
  return it != config.key_locations.end() ? it->second : config.source_path;
}

std::vector<std::string> accepted_config_keys() {
  // Every section reader asks for every one of its keys whether the file has it or not, so
  // reading the smallest valid config asks for all of them.
  const std::string text = "[model]\nwidths = [2, 2]\n[data]\nkind = \"spirals\"\n";
  ConfigSource source("<accepted keys>");
  const toml::table root = parse_document(text, source.name());
  read_config(root, source, source.name());
  return source.known_keys();
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides,
                   const std::vector<FlagOverride>& flags) {
  return parse_config(read_file(path), path, overrides, flags);
}

}  // namespace zl
