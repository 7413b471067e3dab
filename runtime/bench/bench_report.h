// The bench's outputs: the table printed on rank 0, bench.json (every field, the limits, the
// simulated-link label) and bench.csv (one row per mode x bucket cap). Field names are the same in
// the JSON rows and the CSV header; docs/bench.md explains each.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "runtime/bench/bench.h"

namespace zl {

std::string format_bench_table(const BenchReport& report);
nlohmann::ordered_json bench_to_json(const BenchReport& report);
std::string bench_to_csv(const BenchReport& report);

// Writes dir/bench.json and dir/bench.csv (creating dir). Throws UserError when it cannot.
void write_bench_outputs(const BenchReport& report, const std::string& dir);

}  // namespace zl
