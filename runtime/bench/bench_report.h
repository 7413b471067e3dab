// The bench's outputs: the table printed on rank 0, bench.json (every field, the limits, the
// simulated-link label) and bench.csv (one row per mode x bucket cap). Field names are the same in
// the JSON rows and the CSV header; docs/bench.md explains each.
#pragma once

#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

#include "runtime/bench/bench.h"

namespace zl {

inline constexpr std::size_t kNarrowTableColumns = 100;  // TableWidth::Narrow (bench.h)

// Prose for the narrow width: wrapped at word boundaries to kNarrowTableColumns, continuation
// lines starting with `indent`, a word too long for a line (a long path) cut in the middle with
// "..."; ends in a newline. Leading newlines and spaces are kept. Wide: `text` and a newline.
std::string wrap_lines(const std::string& text, const std::string& indent = "",
                       TableWidth width = TableWidth::Narrow);

// A row whose figures the machine's load made unreliable: its per-step times spread more than
// this (p90 / p10), its exposed communication exceeds the mode's communication timed alone, or
// it ran in less than this fraction of its ideal (a lower bound). The table marks such rows and
// says so; the JSON and CSV give the reason in `noisy` (null for a clean row).
inline constexpr double kNoisySpread = 1.2;
inline constexpr double kNoisyVsIdeal = 0.5;
// Why a row is noisy ("p90/p10 1.35; /ideal 0.42"); empty for a clean row.
std::string noise_reason(const BenchRow& row);

std::string format_bench_table(const BenchReport& report, TableWidth width = TableWidth::Narrow);
nlohmann::ordered_json bench_to_json(const BenchReport& report);
std::string bench_to_csv(const BenchReport& report);

// Writes dir/bench.json and dir/bench.csv (creating dir). Throws UserError when it cannot.
void write_bench_outputs(const BenchReport& report, const std::string& dir);

}  // namespace zl
