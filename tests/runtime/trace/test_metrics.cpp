// The metrics CSV: header and empty cells; a resumed run keeps the rows up to its step and drops
// those a crashed run logged after its last checkpoint (they are logged again), without writing
// the kept rows again.
#include <catch2/catch.hpp>

#include <sys/resource.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/trace/metrics.h"

using namespace zl;

namespace {

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

std::string temp_path() {
  const auto dir = std::filesystem::path(ZEROLAP_TEST_TMP) / "metrics";
  std::filesystem::create_directories(dir);
  return (dir / "metrics.csv").string();
}

MetricsRow row(std::int64_t step, double loss) {
  MetricsRow r;
  r.step = step;
  r.train_loss = loss;
  return r;
}

}  // namespace

TEST_CASE("metrics rows leave missing values empty", "[metrics]") {
  const std::string path = temp_path();
  {
    MetricsWriter w(path, 0);
    MetricsRow r = row(10, 0.5);
    r.test_accuracy = 0.75;
    r.elapsed_s = 1.25;
    w.write(r);
  }
  const auto lines = lines_of(path);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0] == MetricsWriter::header());
  CHECK(lines[1] == "10,0,0.5,,,0.75,,,,1.250");
}

TEST_CASE("a resumed run keeps rows up to its step and drops the rest", "[metrics]") {
  const std::string path = temp_path();
  {
    MetricsWriter w(path, 0);
    for (std::int64_t s : {10, 20, 30, 40}) w.write(row(s, 1.0 / s));
  }
  {
    MetricsWriter resumed(path, 20);  // the checkpoint was at step 20; 30 and 40 are redone
    resumed.write(row(30, 0.03));
  }
  const auto lines = lines_of(path);
  REQUIRE(lines.size() == 4);
  CHECK(lines[1].rfind("10,", 0) == 0);
  CHECK(lines[2].rfind("20,", 0) == 0);
  CHECK(lines[3].rfind("30,0,0.03,", 0) == 0);
  {
    MetricsWriter fresh(path, 0);  // a new run starts the file afresh
  }
  CHECK(lines_of(path).size() == 1);
}

TEST_CASE("a resume cuts the file after the kept rows instead of writing them again",
          "[metrics]") {
  // A resumed run that rewrote the file (truncate, then write the kept rows again) lost every
  // row of the earlier run when the rewrite could not finish: a kill, a crash, a full disk. Here
  // the process may not grow any file (RLIMIT_FSIZE of 1 byte, SIGXFSZ ignored so a write fails
  // with EFBIG): the resume must keep the rows without writing them.
  const std::string path = temp_path();
  {
    MetricsWriter w(path, 0);
    for (std::int64_t s : {10, 20, 30, 40}) w.write(row(s, 1.0 / s));
  }
  const auto before = lines_of(path);
  struct rlimit saved {};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &saved) == 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit tiny = saved;
  tiny.rlim_cur = 1;
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &tiny) == 0);
  bool resumed = false;
  try {
    MetricsWriter w(path, 20);
    resumed = true;
    CHECK(w.kept_elapsed_s() == 0.0);
  } catch (const std::exception&) {
  }
  ::setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, old_handler);
  CHECK(resumed);
  const auto lines = lines_of(path);
  REQUIRE(lines.size() == 3);
  CHECK(lines[0] == before[0]);
  CHECK(lines[1] == before[1]);
  CHECK(lines[2] == before[2]);
}

TEST_CASE("a row a crash cut short is dropped, even at or before the resumed step",
          "[metrics]") {
  // A power loss after a durable checkpoint of step 40 can leave row 40 cut short: kept, it came
  // back with fewer columns (and the elapsed time read from its last one), and took the rewrite.
  const std::string path = temp_path();
  {
    std::ofstream out(path);
    out << MetricsWriter::header() << "\n20,0,0.05,,,,,,,2.000\n40,0,0.0";
  }
  {
    MetricsWriter resumed(path, 40);
    CHECK(resumed.kept_elapsed_s() == 2.0);
  }
  const auto lines = lines_of(path);
  REQUIRE(lines.size() == 2);
  CHECK(lines[1] == "20,0,0.05,,,,,,,2.000");
}

TEST_CASE("a resume rewrites a file whose kept rows are not its beginning", "[metrics]") {
  const std::string path = temp_path();
  {
    std::ofstream out(path);
    out << MetricsWriter::header() << "\n10,0,0.1,,,,,,,1.000\n30,0,0.03,,,,,,,3.000\n"
        << "20,0,0.05,,,,,,,2.000\n40,0,0.0";  // out of order, and a row a crash cut short
  }
  { MetricsWriter resumed(path, 20); }
  auto lines = lines_of(path);
  REQUIRE(lines.size() == 3);
  CHECK(lines[1].rfind("10,", 0) == 0);
  CHECK(lines[2].rfind("20,", 0) == 0);
  {
    std::ofstream out(path);  // the header alone, cut short: the header is written whole
    out << "step,epoch";
  }
  { MetricsWriter resumed(path, 20); }
  lines = lines_of(path);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] == MetricsWriter::header());
}
