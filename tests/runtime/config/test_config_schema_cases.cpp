// The generated bad-value test, driven from the config schema: every key the reader accepts
// (accepted_config_keys) gets values of the wrong type, out of range, NaN and infinities where it
// is numeric, and values that overflow its type, chosen from the TOML type of its default (to_toml
// of the smallest config). A key added to the reader is covered without editing this file.
//
// Strict cases must be exit 2 naming the key. Soft cases (the largest value of the key's type, an
// arbitrary string) may be accepted, but must never crash, hang or give another exit code: for
// those, the sizes plan computes (layout, bucket plan, memory estimate) are computed too.
//
// Cost: every case runs in-process through parse_config (what train, bench and plan all start
// with, microseconds each). The executable, whose start-up takes a good part of a second, runs a
// sample under a timeout: `plan` with one strict case per key (the case kind rotating over the
// keys) and every soft case, and `train` and `bench` with the strict and soft cases of every 8th
// key. That keeps the test within a couple of minutes on 2 cores while each command, each case
// kind and each key meets the executable at least once.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/errors.h"
#include "tests/runtime/cli/cli_test_util.h"
#include "models/model.h"
#include "runtime/config/config.h"
#include "runtime/train/plan/bucket_plan.h"
#include "runtime/train/plan/memory_estimate.h"
#include "runtime/train/plan/mode_plan.h"

namespace {

const char* kBase =
    "[model]\nwidths = [2, 8, 3]\n[data]\nkind = \"spirals\"\ntrain_samples = 64\n"
    "test_samples = 32\nbatch_size = 16\neval_batch_size = 32\n[train]\nsteps = 2\n"
    "[bench]\nsteps = 1\nwarmup = 0\nmodes = [\"ddp\"]\n[runtime]\ntimeout_s = 30\n";

struct Case {
  std::string key, value, kind;
  bool strict = true;  // exit 2 naming the key; else exit 0 or 2
};

// "section.key" -> its default as to_toml writes it ("0.001", "\"adam\"", "[]").
std::map<std::string, std::string> defaults() {
  std::map<std::string, std::string> out;
  std::istringstream lines(zl::to_toml(zl::parse_config(kBase, "base.toml")));
  std::string line, section;
  while (std::getline(lines, line)) {
    if (!line.empty() && line[0] == '[') {
      section = line.substr(1, line.find(']') - 1);
    } else if (const auto eq = line.find(" = "); eq != std::string::npos) {
      out[section + "." + line.substr(0, eq)] = line.substr(eq + 3);
    }
  }
  return out;
}

std::vector<Case> cases_of(const std::string& key, const std::string& def) {
  std::vector<Case> out{{key, "{zl = 1}", "wrong type (a table)"}};
  const bool is_string = !def.empty() && def[0] == '"';
  const bool is_array = !def.empty() && def[0] == '[';
  const bool is_bool = def == "true" || def == "false";
  const bool is_number = !def.empty() && !is_string && !is_array && !is_bool;
  const bool is_integer = is_number && def.find_first_of(".eEn") == std::string::npos;
  if (is_number) {
    out.push_back({key, "-1", "out of range"});
    out.push_back({key, "nan", "NaN"});
    out.push_back({key, "inf", "inf"});
    out.push_back({key, "-inf", "-inf"});
    out.push_back({key, is_integer ? "18446744073709551616" : "1e400", "overflows its type"});
    out.push_back({key, is_integer ? "9223372036854775807" : "1.7976931348623157e308",
                   "the largest of its type", false});
  } else if (is_array) {
    out.push_back({key, "[-1]", "out of range"});
    out.push_back({key, "[nan]", "NaN"});
    out.push_back({key, "[inf]", "inf"});
    out.push_back({key, "[18446744073709551616]", "overflows its type"});
    out.push_back({key, "[9223372036854775807, 9223372036854775807]", "the largest", false});
  } else if (is_bool) {
    out.push_back({key, "1", "wrong type (an integer)"});
  } else {
    out.push_back({key, "nan", "NaN", false});
    out.push_back({key, "\"zl-not-a-choice\"", "not a choice", false});
    out.push_back({key, "\"" + std::string(4096, 'x') + "\"", "a long string", false});
  }
  return out;
}

std::vector<Case> all_cases() {
  const auto def = defaults();
  std::vector<Case> out;
  for (const std::string& key : zl::accepted_config_keys()) {
    const auto it = def.find(key);
    for (Case& c : cases_of(key, it != def.end() ? it->second : "")) out.push_back(std::move(c));
  }
  return out;
}

// What plan computes from a config, in-process: each must finish without a crash or an
// exception other than UserError.
void plan_sizes(const zl::Config& c) {
  const zl::ParameterStore layout = zl::Model::parameter_layout(c.model);
  const zl::ModePlan mode = zl::make_mode_plan(c.parallel, c.optimizer, c.precision);
  const zl::BucketPlan plan = zl::build_bucket_plan(
      layout, c.parallel.bucket_cap_mb, c.parallel.first_bucket_cap_mb, 64, c.parallel.assignment);
  const zl::RankMemory m = zl::estimate_peak_rank_memory(c, layout, plan, mode);
  CHECK(m.total() >= 0);
}

std::string config_file() {
  const auto dir = std::filesystem::path(ZEROLAP_TEST_TMP) / "schema_cases";
  std::filesystem::create_directories(dir);
  const auto path = dir / "base.toml";
  std::ofstream(path) << kBase << "[output]\ndir = \"" << (dir / "out").string() << "\"\n";
  return path.string();
}

// Single quotes for the shell; the values above hold none.
std::string set_arg(const Case& c) { return "--set '" + c.key + "=" + c.value + "'"; }

struct CliCase {
  std::string command;
  Case c;
  zl::test::CliResult result;
};

void check_cli(const CliCase& run) {
  const Case& c = run.c;
  const zl::test::CliResult& r = run.result;
  INFO(run.command << " " << c.key << " = " << c.value.substr(0, 60) << " (" << c.kind << "): exit "
                   << r.exit_code << "\n"
                   << r.output.substr(0, 2000));
  if (c.strict) {
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains(c.key));
  } else {
    CHECK((r.exit_code == 0 || r.exit_code == 2));
    if (r.exit_code == 2) CHECK_THAT(r.output, Catch::Contains(c.key));
  }
}

}  // namespace

TEST_CASE("every config key: bad values are exit 2 naming the key, in-process",
          "[config][schema]") {
  const std::vector<Case> cases = all_cases();
  REQUIRE(cases.size() > 200);
  for (const Case& c : cases) {
    INFO(c.key << " = " << c.value.substr(0, 60) << " (" << c.kind << ")");
    try {
      const zl::Config config = zl::parse_config(kBase, "base.toml", {c.key + "=" + c.value});
      CHECK_FALSE(c.strict);
      plan_sizes(config);
    } catch (const zl::UserError& e) {
      CHECK_THAT(e.what(), Catch::Contains(c.key));
    }
  }
}

TEST_CASE("every config key: bad values through plan, train and bench", "[config][schema][cli]") {
  const std::vector<Case> cases = all_cases();
  std::map<std::string, std::vector<Case>> strict, soft;
  std::vector<std::string> keys;
  for (const Case& c : cases) {
    if (strict.count(c.key) == 0 && soft.count(c.key) == 0) keys.push_back(c.key);
    (c.strict ? strict : soft)[c.key].push_back(c);
  }
  // plan: one strict case per key, the kind rotating with the key, and the soft cases of every
  // 4th key; train and bench: one strict and one soft case of every 8th key.
  std::vector<CliCase> runs;
  for (std::size_t k = 0; k < keys.size(); ++k) {
    const auto& mine = strict[keys[k]];
    const auto& easy = soft[keys[k]];
    if (!mine.empty()) runs.push_back({"plan", mine[k % mine.size()], {}});
    if (k % 4 == 0) {
      for (const Case& c : easy) runs.push_back({"plan", c, {}});
    }
    if (k % 8 == 0) {
      for (const char* command : {"train", "bench"}) {
        if (!mine.empty()) runs.push_back({command, mine[(k / 8) % mine.size()], {}});
        if (!easy.empty()) runs.push_back({command, easy[(k / 8) % easy.size()], {}});
      }
    }
  }
  // Four at a time: a process mostly waits for MPI's start-up. Checked on this thread after.
  const std::string out = (std::filesystem::path(ZEROLAP_TEST_TMP) / "schema_cases").string();
  // A new directory per suite run: an earlier run's bench.json there is another bench's results,
  // which bench refuses to overwrite.
  std::filesystem::remove_all(out);
  const std::string config = config_file();
  std::atomic<std::size_t> next{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&] {
      for (std::size_t i = next++; i < runs.size(); i = next++) {
        CliCase& run = runs[i];
        // Each run writes to its own output.dir (a case of output.dir comes after and wins).
        run.result = zl::test::run_zerolap_bounded(run.command + " " + config +
                                                       " --set 'output.dir=\"" + out + "/run" +
                                                       std::to_string(i) + "\"' " + set_arg(run.c),
                                                   60);
      }
    });
  }
  for (auto& t : workers) t.join();
  for (const CliCase& run : runs) check_cli(run);
}
