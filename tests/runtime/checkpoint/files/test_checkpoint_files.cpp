// The rank-local half of checkpoints (runtime/checkpoint/files/checkpoint_files.h): file names,
// when a checkpoint is due, the `latest` pointer and pruning, the sampler-cursor conversion for
// another global batch, and check_checkpoint's validation of a file against a model and optimizer:
// corrupt, truncated, wrong-dtype, missing-tensor, wrong-shape and foreign files are UserErrors
// naming file and tensor.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "base/errors.h"
#include "models/model.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/files/checkpoint_files.h"
#include "runtime/checkpoint/files/checkpoint_pruning.h"
#include "runtime/checkpoint/files/consolidate.h"
#include "runtime/checkpoint/files/run_identity.h"
#include "runtime/checkpoint/files/shard_manifest.h"
#include "runtime/config/config.h"
#include "runtime/checkpoint/files/safetensors.h"

using Catch::Contains;
using namespace zl;
namespace fs = std::filesystem;

namespace {

fs::path temp_dir(const std::string& name) {
  const fs::path dir = fs::path(ZEROLAP_TEST_TMP) / fmt::format("ckpt-files-{}", ::getpid()) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

ModelSpec tiny_spec() {
  ModelSpec spec;
  spec.widths = {3, 4, 2};
  return spec;
}

const std::vector<std::string> kAdamStates = {"exp_avg", "exp_avg_sq"};

// A checkpoint as write_checkpoint lays it out, for `model`'s parameters and Adam state; `edit`
// may change the tensor list (name, dtype, shape) and metadata before writing.
// `poke` sets single values of F32 tensors: {tensor, element, value}.
using Edit = std::function<void(std::vector<TensorSpec>&, std::map<std::string, std::string>&)>;
struct Poke {
  std::string tensor;
  std::int64_t element = 0;
  float value = 0.0f;
};
std::string write_fake_checkpoint(const fs::path& path, Model& model, const Edit& edit = {},
                                  const std::vector<Poke>& pokes = {}) {
  std::vector<TensorSpec> tensors;
  for (const ParameterInfo& p : model.store().parameters()) {
    tensors.push_back({p.name, "F32", p.shape});
    for (const auto& s : kAdamStates) tensors.push_back({"optimizer." + p.name + "." + s, "F32", p.shape});
  }
  std::map<std::string, std::string> meta = {
      {"format", kCheckpointFormat}, {"format_version", kCheckpointFormatVersion},
      {"step", "12"},                {"optimizer_step", "12"},
      {"sampler_position", "24"},    {"global_batch", "32"},
      {"batches_per_epoch", "10"},   {"world_size", "2"},
      {"optimizer", "adam"},         {"optimizer_state", "exp_avg,exp_avg_sq"},
      {"config", "[model]\nkind = \"mlp\"\n"}};
  if (edit) edit(tensors, meta);
  SafetensorsWriter w(path.string(), tensors, meta);
  for (const TensorSpec& t : tensors) {
    std::vector<char> bytes(static_cast<std::size_t>(t.numel() * dtype_size(t.dtype)), 1);
    for (const Poke& p : pokes) {
      if (p.tensor == t.name) std::memcpy(bytes.data() + p.element * 4, &p.value, sizeof(float));
    }
    w.write(bytes.data(), bytes.size());
  }
  w.finish();
  return path.string();
}

CheckpointFacts check(const std::string& path, Model& model, OptimizerConfig optimizer = {}) {
  const SafetensorsReader file(path);
  return check_checkpoint(file, model.store(), optimizer, kAdamStates);
}

}  // namespace

TEST_CASE("checkpoint file names sort by step and parse back", "[checkpoint]") {
  CHECK(checkpoint_file_name(120) == "step_00000120.safetensors");
  CHECK(checkpoint_step_of("step_00000120.safetensors") == 120);
  CHECK(checkpoint_step_of(checkpoint_file_name(123456789)) == 123456789);
  CHECK(checkpoint_step_of("step_00000120.safetensors.tmp") == -1);
  CHECK(checkpoint_step_of("latest") == -1);
  CHECK(checkpoint_step_of("step_x.safetensors") == -1);
}

TEST_CASE("checkpoints are due every `every` steps and at the end", "[checkpoint]") {
  CheckpointConfig c;
  CHECK_FALSE(checkpoint_due(c, 10, 10));  // no dir: never
  c.dir = "ckpt";
  CHECK(checkpoint_due(c, 10, 10));
  CHECK_FALSE(checkpoint_due(c, 5, 10));  // every = 0: only at the end
  c.every = 4;
  CHECK(checkpoint_due(c, 4, 10));
  CHECK(checkpoint_due(c, 8, 10));
  CHECK_FALSE(checkpoint_due(c, 9, 10));
  CHECK(checkpoint_due(c, 0, 0));  // steps = 0: the initial parameters
}

TEST_CASE("the sampler cursor converts to another global batch", "[checkpoint]") {
  CheckpointFacts f;
  f.cursor = 25, f.global_batch = 32, f.batches_per_epoch = 10;  // epoch 2, batch 5
  CHECK(convert_cursor(f, 32, 10) == 25);                        // same global batch: as is
  CHECK(convert_cursor(f, 64, 5) == 2 * 5 + 3);    // 160 samples -> batch ceil(160/64) = 3
  CHECK(convert_cursor(f, 16, 20) == 2 * 20 + 10);  // exact
  f.cursor = 29;                                   // last batch of epoch 2
  CHECK(convert_cursor(f, 48, 6) == 3 * 6);        // 288 samples: past the 6 batches -> next epoch
}

// A stand-in checkpoint of run `run_id`: one tensor, the run id in its metadata.
static void write_owned(const fs::path& dir, std::int64_t step, const std::string& run_id) {
  SafetensorsWriter w((dir / checkpoint_file_name(step)).string(), {{"x", "F32", {1}}},
                      {{"run_id", run_id}});
  const float x = 1.0f;
  w.write_floats(&x, 1);
  w.finish();
}

TEST_CASE("latest pointer and pruning keep the newest checkpoints", "[checkpoint]") {
  const fs::path dir = temp_dir("prune");
  CHECK_FALSE(latest_checkpoint(dir.string()).has_value());
  for (int step : {2, 4, 6, 8}) write_owned(dir, step, "run-a");
  std::ofstream(dir / (checkpoint_file_name(10) + ".tmp")) << "partial";
  write_latest_pointer(dir.string(), checkpoint_file_name(4));
  REQUIRE(latest_checkpoint(dir.string()).has_value());
  CHECK(*latest_checkpoint(dir.string()) == (dir / checkpoint_file_name(4)).string());
  prune_checkpoints(dir.string(), 2, -1, "run-a");
  CHECK_FALSE(fs::exists(dir / checkpoint_file_name(2)));
  CHECK(fs::exists(dir / checkpoint_file_name(4)));  // `latest` names it: never pruned
  CHECK(fs::exists(dir / checkpoint_file_name(6)));
  CHECK(fs::exists(dir / checkpoint_file_name(8)));
  CHECK_FALSE(fs::exists(dir / (checkpoint_file_name(10) + ".tmp")));
  CHECK(fs::exists(dir / kLatestPointerName));

  // A run killed during its start-up check of a shared checkpoint.dir leaves the check's files;
  // the next run's pruning removes them (the directory's lock says no other run is checking).
  const std::string probe = std::string(kSharedDirCheckPrefix) + "00000000deadbeef";
  for (const std::string& name : {probe, probe + ".r1"}) std::ofstream(dir / name) << "x";
  const std::string users = std::string(kSharedDirCheckPrefix) + "notes";  // not the check's
  std::ofstream(dir / users) << "a user's file";
  prune_checkpoints(dir.string(), 2, -1, "run-a");
  CHECK_FALSE(fs::exists(dir / probe));
  CHECK_FALSE(fs::exists(dir / (probe + ".r1")));
  CHECK(fs::exists(dir / users));

  fs::remove(dir / checkpoint_file_name(4));
  CHECK_THROWS_WITH(latest_checkpoint(dir.string()),
                    Contains("latest") && Contains(checkpoint_file_name(4)) &&
                        Contains("checkpoint.resume = \"<file>.safetensors\""));
  // A sharded checkpoint is resumed from its directory: the hint says so, not "<file>.safetensors".
  write_latest_pointer(dir.string(), sharded_dir_name(12) + "/" + kManifestName);
  CHECK_THROWS_WITH(latest_checkpoint(dir.string()),
                    Contains(sharded_dir_name(12)) &&
                        Contains("checkpoint.resume = \"<checkpoint.dir>/step_<N>\""));
}

TEST_CASE("the checkpoint a resume loads: the path, or latest's; a directory needs a manifest",
          "[checkpoint]") {
  const fs::path dir = temp_dir("to_resume");
  CheckpointConfig c;
  c.dir = dir.string();
  CHECK_FALSE(checkpoint_to_resume(c).has_value());  // resume off
  c.resume = true;
  CHECK_FALSE(checkpoint_to_resume(c).has_value());  // nothing yet: step 0
  std::ofstream(dir / checkpoint_file_name(2)) << "x";
  write_latest_pointer(c.dir, checkpoint_file_name(2));
  CHECK(checkpoint_to_resume(c) == (dir / checkpoint_file_name(2)).string());
  fs::create_directories(dir / "step_00000004");  // a sharded step without its manifest
  write_latest_pointer(c.dir, "step_00000004");
  CHECK_THROWS_WITH(checkpoint_to_resume(c),
                    Contains("latest' names '") && Contains("a directory with neither a manifest.json"));
  c.resume_path = (dir / "step_00000004").string();
  CHECK_THROWS_WITH(checkpoint_to_resume(c), Contains("checkpoint.resume = \"" + c.resume_path +
                                                      "\": a directory with neither a manifest.json"));
  std::ofstream(dir / "step_00000004" / "manifest.json") << "{}";
  CHECK(checkpoint_to_resume(c) == c.resume_path);
  c.resume_path = (dir / "missing.safetensors").string();
  CHECK_THROWS_WITH(checkpoint_to_resume(c), Contains("no such file"));
  // A checkpoint directory, or its `latest` pointer, stands for the checkpoint `latest` names, as
  // in `zerolap inspect`: the directory was "without manifest.json", the pointer "truncated or not
  // a safetensors file".
  write_latest_pointer(c.dir, checkpoint_file_name(2));
  for (const fs::path& given : {dir, dir / "latest"}) {
    c.resume_path = given.string();
    CHECK(checkpoint_to_resume(c) == (dir / checkpoint_file_name(2)).string());
  }
  const fs::path empty = temp_dir("to_resume_empty");
  c.resume_path = empty.string();
  CHECK_THROWS_WITH(checkpoint_to_resume(c), Contains("neither a manifest.json") &&
                                                 Contains("nor a latest"));
}

TEST_CASE("pruning deletes only the pruning run's own checkpoints", "[checkpoint]") {
  // Issue: a run's `keep` deleted another run's step_00000000 in the same directory.
  const std::vector<DirCheckpoint> found = {{0, "s0", "run-b"},     {2, "s2", "run-a"},
                                            {4, "s4", std::nullopt}, {6, "s6", "run-a"},
                                            {8, "s8", ""},           {10, "s10", "run-a"}};
  CHECK(checkpoints_to_prune(found, 1, "s10", -1, "run-a") == std::vector<std::string>{"s6", "s2"});
  CHECK(checkpoints_to_prune(found, 2, "s10", -1, "run-a") == std::vector<std::string>{"s2"});
  CHECK(checkpoints_to_prune(found, 1, "s10", 2, "run-a") == std::vector<std::string>{"s6"});
  CHECK(checkpoints_to_prune(found, 0, "s0", -1, "run-b").empty());
  CHECK(checkpoints_to_prune(found, 0, "", -1, "run-c").empty());

  const fs::path dir = temp_dir("prune_owner");
  write_owned(dir, 0, "run-b");
  for (int step : {2, 4, 6}) write_owned(dir, step, "run-a");
  write_latest_pointer(dir.string(), checkpoint_file_name(6));
  prune_checkpoints(dir.string(), 1, -1, "run-a");
  CHECK(fs::exists(dir / checkpoint_file_name(0)));  // run-b's: never this run's to prune
  CHECK_FALSE(fs::exists(dir / checkpoint_file_name(2)));
  CHECK_FALSE(fs::exists(dir / checkpoint_file_name(4)));
  CHECK(fs::exists(dir / checkpoint_file_name(6)));
  const auto listed = list_checkpoints(dir.string());
  REQUIRE(listed.size() == 2);
  CHECK(listed[0].run_id == std::optional<std::string>("run-b"));
  CHECK(listed[1].step == 6);
}

TEST_CASE("same_checkpoint tells a copy from another branch's checkpoint of the run",
          "[checkpoint]") {
  // Two fine-tunes of one run share its id: at one step only their contents tell them apart.
  const fs::path a = temp_dir("same_checkpoint_a"), b = temp_dir("same_checkpoint_b");
  const auto write = [](const fs::path& dir, float value) {
    SafetensorsWriter w((dir / checkpoint_file_name(4)).string(), {{"x", "F32", {1}}},
                        {{"run_id", "run-a"}, {"step", "4"}});
    w.write_floats(&value, 1);
    w.finish();
    return (dir / checkpoint_file_name(4)).string();
  };
  const std::string first = write(a, 1.0f);
  CHECK(same_checkpoint(first, first));
  fs::copy_file(first, b / "copy.safetensors");
  CHECK(same_checkpoint(first, (b / "copy.safetensors").string()));
  const std::string other = write(b, 2.0f);  // the same run and step, another value
  CHECK_FALSE(same_checkpoint(first, other));
  CHECK_FALSE(same_checkpoint(first, (b / "missing.safetensors").string()));
}

TEST_CASE("run.json round-trips; a garbage one is unreadable, naming the file", "[checkpoint]") {
  const fs::path dir = temp_dir("run_record");
  CHECK_FALSE(read_run_record(dir.string()).has_value());
  write_run_record(dir.string(), RunRecord{"20260101-000000-0000abcd", "train", 3, "[model]\n"});
  const auto record = read_run_record(dir.string());
  REQUIRE(record.has_value());
  CHECK(record->run_id == "20260101-000000-0000abcd");
  CHECK(record->command == "train");
  CHECK(record->world_size == 3);
  CHECK(record->config == "[model]\n");
  CHECK(new_run_id() != new_run_id());
  const std::string path = (dir / kRunRecordName).string();
  for (const char* garbage : {"\x01\x02 not json", "[1, 2]", "{\"format\": \"zerolap-run\"}"}) {
    std::ofstream(path) << garbage;
    CHECK_THROWS_WITH(read_run_record(dir.string()), Contains(path) && Contains("unreadable"));
  }
}

TEST_CASE("a pointer or run.json that cannot be written is named and leaves no temporary file",
          "[checkpoint]") {
  // Both are written by replace_file_durably; a temporary file linked to /dev/full fails every
  // write with ENOSPC, as a full disk does.
  const fs::path dir = temp_dir("full_disk");
  const auto fails_naming = [&](const std::string& name, const std::string& what,
                                const std::function<void()>& write) {
    const fs::path temp = dir / (name + kCheckpointTempSuffix);
    fs::create_symlink("/dev/full", temp);
    const std::string message = fmt::format("cannot write {} '{}': ", what, temp.string());
    CHECK_THROWS_WITH(write(), Contains(message) && Contains("No space left"));
    CHECK_FALSE(fs::exists(fs::symlink_status(temp)));
    CHECK_FALSE(fs::exists(dir / name));
  };
  fails_naming(kLatestPointerName, "checkpoint pointer",
               [&] { write_latest_pointer(dir.string(), checkpoint_file_name(2)); });
  fails_naming(kRunRecordName, "run record", [&] {
    write_run_record(dir.string(), RunRecord{"20260101-000000-0000abcd", "train", 1, ""});
  });
}

TEST_CASE("consolidate never writes a file of a run's directory, even with --overwrite",
          "[checkpoint]") {
  // The output is checked before the checkpoint is read: any manifest.json makes a step here.
  const fs::path dir = temp_dir("consolidate_run_files");
  const fs::path step = dir / "ck" / "step_00000002";
  fs::create_directories(step);
  std::ofstream(step / kManifestName) << "{}";
  const fs::path run = dir / "run", other = dir / "other";
  write_run_record(run.string(), RunRecord{"20260101-000000-0000abcd", "train", 1, ""});
  std::ofstream(run / kDirectoryLockName) << "pid 1 on host h\n";
  std::ofstream(run / "metrics.csv") << "step,loss\n";
  fs::create_directories(other);
  const auto contents = [&] {
    std::string all;
    for (const char* name : {kRunRecordName, kDirectoryLockName, "metrics.csv"}) {
      std::ifstream in(run / name);
      all.append(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    return all;
  };
  const std::string before = contents();
  // A run's record and lock anywhere, existing or new; a run's output beside a run.json.
  for (const fs::path& out : {run / kRunRecordName, run / kDirectoryLockName, run / "metrics.csv",
                              run / "config.toml", other / kRunRecordName,
                              other / kDirectoryLockName}) {
    for (const ExistingOutput existing : {ExistingOutput::Refuse, ExistingOutput::Replace}) {
      CHECK_THROWS_WITH(
          consolidate_checkpoint(step.string(), out.string(), ConsolidateState::Include, existing),
          Contains("'" + out.string() + "' is a file of a run's directory"));
    }
  }
  CHECK(contents() == before);
  CHECK(fs::is_empty(other));
  CHECK_FALSE(fs::exists(run / "config.toml"));
  // With no run.json beside it, metrics.csv is no run's: the checkpoint is read (and refused).
  CHECK_THROWS_WITH(consolidate_checkpoint(step.string(), (other / "metrics.csv").string(),
                                           ConsolidateState::Include),
                    !Contains("a file of a run's directory") && Contains(kManifestName));
}

TEST_CASE("consolidate of a single-file checkpoint says it is one file already", "[checkpoint]") {
  const fs::path dir = temp_dir("consolidate_single_file");
  const fs::path single = dir / checkpoint_file_name(4);
  std::ofstream(single) << "not read";
  CHECK_THROWS_WITH(consolidate_checkpoint(single.string(), (dir / "out.safetensors").string(),
                                           ConsolidateState::Include),
                    Contains("'" + single.string() + "' is a single-file checkpoint") &&
                        Contains("already one safetensors file"));
  CHECK_FALSE(fs::exists(dir / "out.safetensors"));
}

TEST_CASE("pruning keeps the checkpoint a running run resumed from", "[checkpoint]") {
  // A resumed run that diverges writes finite checkpoints of a bad state before a step turns
  // non-finite; the one it resumed from must survive them (docs/design.md, "Divergence").
  const fs::path dir = temp_dir("prune_protected");
  for (int step : {6, 7, 8, 9}) write_owned(dir, step, "r");
  write_latest_pointer(dir.string(), checkpoint_file_name(9));
  prune_checkpoints(dir.string(), 3, 6, "r");
  CHECK(fs::exists(dir / checkpoint_file_name(6)));
  CHECK(fs::exists(dir / checkpoint_file_name(7)));
  write_owned(dir, 10, "r");
  write_latest_pointer(dir.string(), checkpoint_file_name(10));
  prune_checkpoints(dir.string(), 3, 6, "r");
  CHECK(fs::exists(dir / checkpoint_file_name(6)));
  CHECK_FALSE(fs::exists(dir / checkpoint_file_name(7)));
  prune_checkpoints(dir.string(), 3, -1, "r");  // the run ended: back to `keep`
  CHECK_FALSE(fs::exists(dir / checkpoint_file_name(6)));
  CHECK(fs::exists(dir / checkpoint_file_name(8)));
}

TEST_CASE("check_checkpoint accepts a well-formed checkpoint", "[checkpoint]") {
  Model model(tiny_spec(), DeviceKind::Cpu);
  const auto path = write_fake_checkpoint(temp_dir("ok") / "c.safetensors", model);
  const CheckpointFacts f = check(path, model);
  CHECK(f.step == 12);
  CHECK(f.optimizer_step == 12);
  CHECK(f.cursor == 24);
  CHECK(f.global_batch == 32);
  CHECK(f.world_size == 2);
}

TEST_CASE("bad checkpoints are UserErrors naming the file and the tensor", "[checkpoint]") {
  Model model(tiny_spec(), DeviceKind::Cpu);
  const fs::path dir = temp_dir("bad");
  const std::string path = (dir / "c.safetensors").string();

  SECTION("corrupt data") {
    write_fake_checkpoint(path, model);
    std::string bytes;
    {
      std::ifstream in(path, std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(in), {});
    }
    bytes[bytes.size() - 5] ^= 0x01;  // inside the last tensor of the data section
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
    const SafetensorsReader file(path);
    const std::string last = file.tensors().back().name;
    CHECK_THROWS_WITH(check(path, model), Contains(path) && Contains("'" + last + "'") &&
                                              Contains("CRC32"));
  }
  SECTION("truncated") {
    write_fake_checkpoint(path, model);
    fs::resize_file(path, fs::file_size(path) - 8);
    CHECK_THROWS_AS(check(path, model), UserError);
    CHECK_THROWS_WITH(check(path, model), Contains(path) && Contains("truncated") &&
                                              Contains("tensor '"));
  }
  SECTION("wrong dtype") {
    write_fake_checkpoint(path, model, [](auto& tensors, auto&) {
      for (auto& t : tensors) if (t.name == "layers.1.bias") t.dtype = "F16";
    });
    CHECK_THROWS_WITH(check(path, model),
                      Contains(path) && Contains("'layers.1.bias'") && Contains("F16"));
  }
  SECTION("missing parameter") {
    write_fake_checkpoint(path, model, [](auto& tensors, auto&) {
      std::erase_if(tensors, [](const TensorSpec& t) { return t.name == "layers.0.weight"; });
    });
    CHECK_THROWS_WITH(check(path, model),
                      Contains(path) && Contains("missing tensor 'layers.0.weight'"));
  }
  SECTION("missing optimizer state") {
    write_fake_checkpoint(path, model, [](auto& tensors, auto&) {
      std::erase_if(tensors, [](const TensorSpec& t) {
        return t.name == "optimizer.layers.0.bias.exp_avg_sq";
      });
    });
    CHECK_THROWS_WITH(check(path, model),
                      Contains(path) && Contains("'optimizer.layers.0.bias.exp_avg_sq'"));
  }
  SECTION("wrong shape") {
    write_fake_checkpoint(path, model, [](auto& tensors, auto&) {
      for (auto& t : tensors) if (t.name == "layers.0.weight") t.shape = {3, 4};
    });
    CHECK_THROWS_WITH(check(path, model), Contains(path) && Contains("'layers.0.weight'") &&
                                              Contains("[3, 4]") && Contains("[4, 3]"));
  }
  SECTION("unexpected tensor") {
    write_fake_checkpoint(path, model, [](auto& tensors, auto&) {
      tensors.push_back({"layers.2.weight", "F32", {2, 2}});
    });
    CHECK_THROWS_WITH(check(path, model), Contains(path) && Contains("'layers.2.weight'"));
  }
  SECTION("another optimizer kind") {
    write_fake_checkpoint(path, model, [](auto&, auto& meta) { meta["optimizer"] = "sgd"; });
    CHECK_THROWS_WITH(check(path, model), Contains(path) && Contains("optimizer.kind"));
  }
  SECTION("not a zerolap checkpoint") {
    write_fake_checkpoint(path, model, [](auto&, auto& meta) { meta.erase("format"); });
    CHECK_THROWS_WITH(check(path, model), Contains(path) && Contains("not a zerolap checkpoint"));
  }
  SECTION("missing metadata") {
    write_fake_checkpoint(path, model, [](auto&, auto& meta) { meta.erase("sampler_position"); });
    CHECK_THROWS_WITH(check(path, model), Contains(path) && Contains("'sampler_position'"));
  }
  // Counts no run reaches: before the range checks, sampler_position = INT64_MAX overflowed the
  // resumed sampler (an internal check, exit 1) and optimizer_step = INT64_MAX trained to NaN.
  const std::string int64_max = std::to_string(std::numeric_limits<std::int64_t>::max());
  SECTION("sampler_position beyond any run") {
    write_fake_checkpoint(path, model,
                          [&](auto&, auto& meta) { meta["sampler_position"] = int64_max; });
    CHECK_THROWS_AS(check(path, model), UserError);
    CHECK_THROWS_WITH(check(path, model), Contains(path) && Contains("'sampler_position'"));
  }
  SECTION("optimizer_step beyond any run") {
    write_fake_checkpoint(path, model,
                          [&](auto&, auto& meta) { meta["optimizer_step"] = int64_max; });
    CHECK_THROWS_AS(check(path, model), UserError);
    CHECK_THROWS_WITH(check(path, model), Contains(path) && Contains("'optimizer_step'"));
  }
  SECTION("optimizer_step above step") {
    write_fake_checkpoint(path, model, [](auto&, auto& meta) { meta["optimizer_step"] = "13"; });
    CHECK_THROWS_WITH(check(path, model), Contains(path) && Contains("'optimizer_step'") &&
                                              Contains("'step' = 12"));
  }
}

// Values a run never writes, with valid checksums (before these checks they loaded, and the run
// failed steps later with exit 1, "diverged ... lower optimizer.lr"), and metadata that
// contradicts its meaning (global_batch = 0 resumed "at batch 0" and re-read data silently).
TEST_CASE("impossible checkpoint values are UserErrors naming the file and the tensor or key",
          "[checkpoint]") {
  Model model(tiny_spec(), DeviceKind::Cpu);
  const fs::path dir = temp_dir("values");
  const std::string path = (dir / "c.safetensors").string();
  const float nan = std::nanf(""), inf = std::numeric_limits<float>::infinity();
  struct ValueCase {
    std::string tensor;
    std::int64_t element;
    float value;
    const char* shown;
  };
  for (const ValueCase& c : std::vector<ValueCase>{
           {"layers.0.weight", 5, nan, "nan"},
           {"layers.1.bias", 1, -inf, "-inf"},
           {"optimizer.layers.0.bias.exp_avg", 2, inf, "inf"},
           {"optimizer.layers.1.weight.exp_avg_sq", 3, nan, "nan"},
           {"optimizer.layers.1.weight.exp_avg_sq", 7, -0.5f, "-0.5"}}) {
    INFO(c.tensor << "[" << c.element << "] = " << c.shown);
    write_fake_checkpoint(path, model, {}, {{c.tensor, c.element, c.value}});
    CHECK_THROWS_AS(check(path, model), UserError);
    CHECK_THROWS_WITH(check(path, model),
                      Contains(path) && Contains("'" + c.tensor + "'") &&
                          Contains(fmt::format("{} at element {}", c.shown, c.element)));
  }
  // A negative first moment or parameter is fine; -0 is not negative.
  write_fake_checkpoint(path, model, {},
                        {{"layers.0.weight", 0, -3.0f}, {"optimizer.layers.0.weight.exp_avg", 1, -1.0f},
                         {"optimizer.layers.0.weight.exp_avg_sq", 2, -0.0f}});
  CHECK_NOTHROW(check(path, model));

  for (const auto& entry : std::vector<std::pair<std::string, std::string>>{
           {"global_batch", "0"}, {"batches_per_epoch", "0"}, {"world_size", "0"},
           {"world_size", "1099511627776"}, {"global_batch", "33"}}) {
    // Plain references, not structured bindings: clang 14 (the sanitizer build) cannot capture those.
    const std::string& key = entry.first;
    const std::string& value = entry.second;
    INFO(key << " = " << value);
    write_fake_checkpoint(path, model, [&](auto&, auto& meta) { meta[key] = value; });
    CHECK_THROWS_AS(check(path, model), UserError);
    CHECK_THROWS_WITH(check(path, model), Contains(path) && Contains("'" + key + "'"));
  }
}

TEST_CASE("the fault hook only fires for its point and step", "[checkpoint]") {
  // Not set, another point or another step: returns (firing would end this test process).
  ::unsetenv(kFaultEnvVar);
  checkpoint_fault_point("after_write", 4);
  ::setenv(kFaultEnvVar, "after_rename", 1);
  checkpoint_fault_point("after_write", 4);
  ::setenv(kFaultEnvVar, "after_write:6", 1);
  checkpoint_fault_point("after_write", 4);
  ::unsetenv(kFaultEnvVar);
  SUCCEED();
}
