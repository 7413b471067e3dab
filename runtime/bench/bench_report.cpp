// Table, JSON and CSV of a BenchReport (see bench_report.h). Times in the table are milliseconds
// per step; in the files, seconds per step.
#include "runtime/bench/bench_report.h"

#include <algorithm>
#include <filesystem>
#include <sstream>

#include <fmt/format.h>

#include "base/checked_write.h"
#include "base/errors.h"
#include "runtime/comm/link/simulated_link.h"

namespace zl {
namespace {

double mib(std::int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

std::int64_t max_of(const std::vector<std::int64_t>& v) {
  return v.empty() ? 0 : *std::max_element(v.begin(), v.end());
}

// The scalar fields of a row, in CSV column order (the JSON rows hold these and the vectors).
nlohmann::ordered_json row_scalars(const BenchRow& r) {
  nlohmann::ordered_json j{
      {"precision", r.precision}, {"reduce_dtype", r.reduce_dtype},
      {"master_weights", r.master_weights}, {"mode", r.mode}, {"bucket_cap_mb", r.bucket_cap_mb},
      {"buckets", r.buckets}, {"samples_per_step", r.samples_per_step},
      {"step_s", r.step_s}, {"step_median_s", r.step_median_s}, {"step_p10_s", r.step_p10_s},
      {"step_p90_s", r.step_p90_s}, {"samples_per_s", r.samples_per_s},
      {"speedup_vs_ddp", r.speedup_vs_ddp ? nlohmann::ordered_json(*r.speedup_vs_ddp) : nullptr},
      {"forward_s", r.forward_s}, {"backward_s", r.backward_s},
      {"finish_backward_s", r.finish_backward_s}, {"optimizer_s", r.optimizer_s},
      {"wait_s", r.wait_s}, {"comm_busy_s", r.comm_busy_s},
      {"compute_s", r.compute_s}, {"compute_forward_s", r.compute_forward_s},
      {"compute_backward_s", r.compute_backward_s},
      {"compute_optimizer_s", r.compute_optimizer_s},
      {"reduction_s", r.reduction_s}, {"broadcast_s", r.broadcast_s}, {"comm_s", r.comm_s},
      {"hidden_comm_s", r.hidden_comm_s}, {"exposed_comm_s", r.exposed_comm_s},
      {"idle_s", r.idle_s}, {"comm_overhead_s", r.comm_overhead_s},
      {"phases_vs_step", r.phases_vs_step},
      {"comm_model_s", r.comm_model_s}, {"nonoverlap_comm_s", r.nonoverlap_comm_s},
      {"ideal_step_s", r.ideal_step_s}, {"predicted_step_s", r.predicted_step_s},
      {"vs_ideal", r.vs_ideal},
      {"wire_bytes_per_step", r.wire_bytes_per_step},
      {"payload_bytes_per_step", r.payload_bytes_per_step}};
  for (const LinkTier tier : {LinkTier::Inter, LinkTier::Intra}) {
    const BenchRow::TierFigures& t = r.tiers[static_cast<std::size_t>(tier)];
    const std::string name = to_string(tier);
    j[name + "_comm_model_s"] = t.comm_model_s;
    j[name + "_comm_s"] = t.comm_s;
    j[name + "_hidden_comm_s"] = t.hidden_comm_s;
    j[name + "_exposed_comm_s"] = t.exposed_comm_s;
    j[name + "_wire_bytes_per_step"] = t.wire_bytes_per_step;
  }
  j["state_bytes_max"] = max_of(r.state_bytes);
  j["planned_state_bytes_max"] = max_of(r.planned_state_bytes);
  j["optimizer_state_bytes_max"] = max_of(r.optimizer_state_bytes);
  j["planned_optimizer_state_bytes_max"] = max_of(r.planned_optimizer_state_bytes);
  j["peak_rss_bytes_max"] = max_of(r.peak_rss_bytes);
  const std::string noise = noise_reason(r);
  j["noisy"] = noise.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(noise);
  return j;
}

std::string csv_cell(const nlohmann::ordered_json& v) {
  if (v.is_null()) return "";
  if (v.is_string()) {
    // The link label has commas ("simulated link: 10 Gb/s, 0 us"): quoted as RFC 4180 says.
    const std::string text = v.get<std::string>();
    if (text.find_first_of(",\"\n") == std::string::npos) return text;
    std::string quoted = "\"";
    for (const char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
    return quoted + "\"";
  }
  if (v.is_number_float()) return fmt::format("{:.9g}", v.get<double>());
  return v.dump();
}

// A narrow table's lines: `line(row)` for each row. The narrow tables have no precision or
// bucket-cap column (the mode names need the room): a line names the precision and the cap before
// the rows where either changes.
template <typename Line>
std::string grouped_lines(const std::vector<BenchRow>& rows, const Line& line) {
  std::string out;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const BenchRow& r = rows[i];
    if (i == 0 || rows[i - 1].precision != r.precision ||
        rows[i - 1].bucket_cap_mb != r.bucket_cap_mb) {
      const std::string precision =
          r.precision != "bf16" ? r.precision
                                : fmt::format("bf16 (reduce_dtype {}, master_weights {})",
                                              r.reduce_dtype, r.master_weights);
      out += fmt::format("{}, bucket_cap_mb {:g}:\n", precision, r.bucket_cap_mb);
    }
    out += line(r);
  }
  return out;
}

// The share of `comm_model_s` (the collectives timed alone) that did not lengthen the step,
// "60%"; "-" without communication (nothing to hide).
std::string hidden_share(double exposed_s, double comm_model_s) {
  if (comm_model_s <= 0.0) return "-";
  return fmt::format("{:.0f}%", std::clamp(1.0 - exposed_s / comm_model_s, 0.0, 1.0) * 100.0);
}

// With two tiers: per row each tier's communication timed alone, its exposed part on the
// timeline and the share hidden (BenchRow::tiers). Fits 100 columns with the longest mode name.
template <typename ModeColumn>
std::string tier_table(const BenchReport& rep, const ModeColumn& mode) {
  std::string out = wrap_lines(fmt::format(
      "\nper tier of the link (nodes of {} ranks): each tier's collectives of a step timed alone "
      "(comm), the part of them no compute covered (exposed) and the share hidden",
      rep.link.node_ranks));
  out += fmt::format("{} {:>8} {:>8} {:>6} {:>8} {:>8} {:>6}\n", mode("mode"), "inter", "exposed",
                     "hidden", "intra", "exposed", "hidden");
  out += grouped_lines(rep.rows, [&](const BenchRow& r) {
    std::string line = mode(r.mode);
    for (const BenchRow::TierFigures& t : r.tiers) {
      line += fmt::format(" {:>8.2f} {:>8.2f} {:>6}", t.comm_model_s * 1e3,
                          t.exposed_comm_s * 1e3, hidden_share(t.exposed_comm_s, t.comm_model_s));
    }
    return line + "\n";
  });
  return out;
}

}  // namespace

std::string wrap_lines(const std::string& text, const std::string& indent, TableWidth width) {
  if (width == TableWidth::Wide) return text + "\n";
  std::string out;
  std::size_t start = 0;
  while (start < text.size() && text[start] == '\n') out += text[start++];
  std::string line;
  while (start < text.size() && text[start] == ' ') line += text[start++];
  const std::size_t lead = line.size();
  std::istringstream words(text.substr(start));
  const std::size_t room = kNarrowTableColumns - std::max(lead, indent.size());
  for (std::string word; words >> word;) {
    if (word.size() > room) {  // keep both ends: a path's start and its file name
      const std::size_t head = room / 3;
      word = word.substr(0, head) + "..." + word.substr(word.size() - (room - head - 3));
    }
    if (line.size() > lead && line.size() + 1 + word.size() > kNarrowTableColumns) {
      out += line + "\n";
      line = indent;
    }
    line += (line.size() > lead && line != indent ? " " : "") + word;
  }
  return out + line + "\n";
}

std::string noise_reason(const BenchRow& r) {
  std::vector<std::string> why;
  if (r.step_p10_s > 0.0 && r.step_p90_s / r.step_p10_s > kNoisySpread) {
    why.push_back(fmt::format("p90/p10 {:.2f}", r.step_p90_s / r.step_p10_s));
  }
  if (r.comm_model_s > 0.0 && r.exposed_comm_s > r.comm_model_s) {
    why.push_back("exposed > comm");
  }
  if (r.ideal_step_s > 0.0 && r.vs_ideal < kNoisyVsIdeal) {
    why.push_back(fmt::format("/ideal {:.2f}", r.vs_ideal));
  }
  return fmt::format("{}", fmt::join(why, "; "));  // no comma: it is a CSV cell
}

std::string format_bench_table(const BenchReport& rep, TableWidth width) {
  const bool wide = width == TableWidth::Wide;
  const bool two_tiers = rep.link.node_ranks > 0;
  std::size_t mode_width = 4;  // "mode"
  for (const BenchRow& r : rep.rows) mode_width = std::max(mode_width, r.mode.size());
  if (wide) mode_width = std::max<std::size_t>(mode_width, 39);
  const auto mode = [&](const std::string& name) {
    return fmt::format("{:<{}}", name, mode_width);
  };
  std::string out;
  if (!rep.link_label.empty()) {  // two tiers make a long label: wrapped
    out += wrap_lines(fmt::format("*** {} (every figure below) ***", rep.link_label), "    ",
                      width);
  }
  out += fmt::format("{} ranks, {} parameters, {} timed steps after {} warmup{}; times in ms per "
                     "step\n",
                     rep.world_size, rep.parameters, rep.steps, rep.warmup,
                     rep.rounds == 1 ? "" : fmt::format(", x {} rounds", rep.rounds));
  out += fmt::format(
      "{}comm threads {}\n\n",
      rep.device == DeviceKind::Cuda ? std::string()
                                     : fmt::format("{} GEMM thread{} per rank, ", rep.cpu_threads,
                                                   rep.cpu_threads == 1 ? "" : "s"),
      rep.comm_priority == CommPriority::Realtime ? "realtime" : "at normal priority");
  // Narrow: the mark right after /ideal; a row of the longest mode name
  // (zero2/after_backward/reduce_scatter_allgather, 45 columns) ends at column 97.
  const auto mark = [&](const BenchRow& r) {
    return noise_reason(r).empty() ? "" : wide ? " *" : "*";
  };
  out += wide ? fmt::format("{:<5} {} {:>6} {:>8} {:>15} {:>9} {:>6} {:>8} {:>8} {:>8} {:>7} "
                            "{:>8} {:>6}\n",
                            "prec", mode("mode"), "cap", "step", "p10-p90", "samples/s", "x ddp",
                            "compute", "comm", "exposed", "hidden", "ideal", "/ideal")
              : fmt::format("{} {:>7} {:>6} {:>5} {:>7} {:>7} {:>6} {:>6}\n", mode("mode"),
                            "step", "spread", "x ddp", "comm", "exposed", "hidden", "/ideal");
  const auto step_line = [&](const BenchRow& r) {
    const std::string hidden = hidden_share(r.exposed_comm_s, r.comm_model_s);
    const std::string speedup = r.speedup_vs_ddp ? fmt::format("{:.2f}", *r.speedup_vs_ddp) : "-";
    if (wide) {
      return fmt::format(
          "{:<5} {} {:>6g} {:>8.2f} {:>15} {:>9.0f} {:>6} {:>8.2f} {:>8.2f} {:>8.2f} {:>7} "
          "{:>8.2f} {:>6.2f}{}\n",
          r.precision, mode(r.mode), r.bucket_cap_mb, r.step_s * 1e3,
          fmt::format("{:.2f}-{:.2f}", r.step_p10_s * 1e3, r.step_p90_s * 1e3), r.samples_per_s,
          speedup, r.compute_s * 1e3, r.comm_model_s * 1e3, r.exposed_comm_s * 1e3,
          hidden, r.ideal_step_s * 1e3, r.vs_ideal, mark(r));
    }
    return fmt::format("{} {:>7.2f} {:>6.2f} {:>5} {:>7.2f} {:>7.2f} {:>6} {:>6.2f}{}\n",
                       mode(r.mode), r.step_s * 1e3,
                       r.step_p10_s > 0.0 ? r.step_p90_s / r.step_p10_s : 0.0, speedup,
                       r.comm_model_s * 1e3, r.exposed_comm_s * 1e3, hidden, r.vs_ideal,
                       mark(r));
  };
  if (wide) {
    for (const BenchRow& r : rep.rows) out += step_line(r);
  } else {
    out += grouped_lines(rep.rows, step_line);
  }
  const auto noisy_rows = std::count_if(rep.rows.begin(), rep.rows.end(), [](const BenchRow& r) {
    return !noise_reason(r).empty();
  });
  if (noisy_rows > 0) {
    out += fmt::format(
        "* noisy: {} of {} rows (p90/p10 above {:.1f}, exposed above comm, or /ideal below {:.1f}:"
        "\n  the machine was busy while they ran); compare them only after a rerun on an idle "
        "machine\n",
        noisy_rows, rep.rows.size(), kNoisySpread, kNoisyVsIdeal);
  }
  const auto bf16 = std::find_if(rep.rows.begin(), rep.rows.end(),
                                 [](const BenchRow& r) { return r.precision == "bf16"; });
  if (wide && bf16 != rep.rows.end()) {  // the bf16 rows' wire and masters, once
    out += fmt::format("bf16 rows: reduce_dtype {}, master_weights {}\n", bf16->reduce_dtype,
                       bf16->master_weights);
  }
  out += wrap_lines(
      fmt::format("\nfrom the streams' timeline ({}): phases' busy time, collectives, and "
                  "the share of them compute covered{}",
                  rep.device == DeviceKind::Cuda ? "CUDA events" : "host clocks of the threads",
                  wide ? "; per rank (max over ranks) the bytes sent per step and the state "
                         "(parameters + gradients + master + optimizer state)"
                       : ""));
  if (wide) {
    out += fmt::format("{:<5} {} {:>6} {:>8} {:>8} {:>7} {:>6} {:>7} {:>8} {:>7} {:>8} {:>8} "
                       "{:>7} {:>10} {:>10} {:>9}\n",
                       "prec", mode("mode"), "cap", "forward", "backward", "optim", "wait", "f+b+o",
                       "reduce", "bcast", "hidden", "exposed", "idle", "wire MB", "state MiB",
                       "peak MiB");
    for (const BenchRow& r : rep.rows) {
      out += fmt::format("{:<5} {} {:>6g} {:>8.2f} {:>8.2f} {:>7.2f} {:>6.2f} {:>6.0f}% {:>8.2f} "
                         "{:>7.2f} {:>8.2f} {:>8.2f} {:>7.2f} {:>10.2f} {:>10.2f} {:>9.1f}\n",
                         r.precision, mode(r.mode), r.bucket_cap_mb, r.forward_s * 1e3,
                         r.backward_s * 1e3, r.optimizer_s * 1e3, r.wait_s * 1e3,
                         r.phases_vs_step * 100.0, r.reduction_s * 1e3, r.broadcast_s * 1e3,
                         r.hidden_comm_s * 1e3, r.exposed_comm_s * 1e3, r.idle_s * 1e3,
                         static_cast<double>(r.wire_bytes_per_step) * 1e-6,
                         mib(max_of(r.state_bytes)), mib(max_of(r.peak_rss_bytes)));
    }
  } else {
    out += fmt::format("{} {:>7} {:>8} {:>6} {:>5} {:>6} {:>6} {:>7}\n", mode("mode"), "forward",
                       "backward", "optim", "wait", "reduce", "bcast", "exposed");
    out += grouped_lines(rep.rows, [&](const BenchRow& r) {
      return fmt::format("{} {:>7.2f} {:>8.2f} {:>6.2f} {:>5.2f} {:>6.2f} {:>6.2f} {:>7.2f}\n",
                         mode(r.mode), r.forward_s * 1e3, r.backward_s * 1e3, r.optimizer_s * 1e3,
                         r.wait_s * 1e3, r.reduction_s * 1e3, r.broadcast_s * 1e3,
                         r.exposed_comm_s * 1e3);
    });
    out += wrap_lines(fmt::format(
        "\nper rank (max over ranks): the bytes sent per step{}, the state (parameters + "
        "gradients + master + optimizer state) and the peak resident memory",
        two_tiers ? " between nodes and inside a node" : ""));
    out += two_tiers ? fmt::format("{} {:>9} {:>9} {:>10} {:>9}\n", mode("mode"), "inter MB",
                                   "intra MB", "state MiB", "peak MiB")
                     : fmt::format("{} {:>9} {:>10} {:>9}\n", mode("mode"), "wire MB",
                                   "state MiB", "peak MiB");
    const auto mb = [](std::int64_t bytes) { return static_cast<double>(bytes) * 1e-6; };
    out += grouped_lines(rep.rows, [&](const BenchRow& r) {
      const std::string wire =
          two_tiers ? fmt::format("{:>9.2f} {:>9.2f}", mb(r.tiers[0].wire_bytes_per_step),
                                  mb(r.tiers[1].wire_bytes_per_step))
                    : fmt::format("{:>9.2f}", mb(r.wire_bytes_per_step));
      return fmt::format("{} {} {:>10.2f} {:>9.1f}\n", mode(r.mode), wire,
                         mib(max_of(r.state_bytes)), mib(max_of(r.peak_rss_bytes)));
    });
  }
  if (two_tiers) out += tier_table(rep, mode);
  const BenchLimits& l = rep.limits;
  const bool gpu = l.device == DeviceKind::Cuda;  // Note [Limits on the device]
  const char* bandwidth = gpu ? "device add kernel" : "add kernel";
  out += fmt::format("\nlimits (per rank, all ranks at once) measured on {}: {} {:.1f} GB/s\n",
                     gpu ? "cuda" : "cpu", bandwidth, l.triad_gbps);
  if (gpu) out += fmt::format("  {}\n", l.device_summary);
  for (const PrecisionLimits& p : l.precisions) {
    out += fmt::format("  {}: GEMM floor {:.2f} ms/step; fused optimizer {:.1f} GB/s ({:.0f}% of "
                       "{}, {} B/element)\n",
                       p.precision, p.gemm_step_s * 1e3, p.optimizer_gbps,
                       p.optimizer_vs_triad * 100.0, bandwidth, p.optimizer_bytes_per_element);
    out += wrap_lines(fmt::format("    {} GEMM: {}", gpu ? "GPU" : "CPU", p.gemm_kernel), "      ");
    for (const GemmLimit& g : p.gemm) {
      out += fmt::format("    gemm {:<16} m={:<6} n={:<6} k={:<6} x{:<3} {:>7.1f} GFLOP/s\n",
                         g.pass, g.m, g.n, g.k, g.count, g.gflops);
    }
  }
  if (l.collectives_local && !l.collectives.empty()) {
    out += "  collectives: one rank and no link model, so local (no network; use link.ranks to "
           "model one)\n";
  }
  // A heading per communicator where more than one was measured (a node's, a shard group's,
  // the replicas').
  const auto same_comm = [](const CollectiveLimit& a, const CollectiveLimit& b) {
    return a.tier == b.tier && a.members == b.members && a.stride == b.stride;
  };
  const bool several = std::any_of(l.collectives.begin(), l.collectives.end(),
                                   [&](const CollectiveLimit& c) {
                                     return !same_comm(c, l.collectives.front());
                                   });
  std::size_t op_width = 0;  // the longest collective's name: the columns after it align
  for (const CollectiveLimit& c : l.collectives) op_width = std::max(op_width, c.op.size());
  for (std::size_t i = 0; i < l.collectives.size(); ++i) {
    const CollectiveLimit& c = l.collectives[i];
    if ((rep.link.node_ranks > 0 || several) && (i == 0 || !same_comm(l.collectives[i - 1], c))) {
      const std::string tier = rep.link.node_ranks == 0 ? std::string("on")
                               : c.tier == LinkTier::Intra
                                   ? std::string("inside a node (link.intra_gbps),")
                                   : std::string("between nodes (link.bandwidth_gbps),");
      const std::string ranks =
          c.stride > 1 ? fmt::format("{} ranks {} apart", c.members, c.stride)
          : c.members > 0 && c.members < rep.world_size
              ? fmt::format("{} consecutive ranks", c.members)
              : std::string("every rank");
      out += fmt::format("  {} {}, timed as {} ranks:\n", tier, ranks, c.ranks);
    }
    out += fmt::format("  {:<{}} {:<4} {:>9.3f} MiB {:>8.3f} ms  algbw {:>7.2f} busbw {:>7.2f} "
                       "GB/s ({:.1f} Gb/s)\n",
                       c.op, op_width, dtype_name(c.dtype), mib(c.bytes), c.seconds * 1e3,
                       c.algbw_gbps, c.busbw_gbps, c.busbw_gbps * 8.0);
  }
  if (!rep.link_label.empty()) out += fmt::format("*** {} ***\n", rep.link_label);
  return out;
}

nlohmann::ordered_json bench_to_json(const BenchReport& rep) {
  nlohmann::ordered_json j{
      {"config", rep.config_path},
      {"effective_config", rep.effective_config},  // which config these results are of
      {"world_size", rep.world_size}, {"parameters", rep.parameters}, {"warmup", rep.warmup},
      {"steps", rep.steps}, {"rounds", rep.rounds}};
  j["simulated_link"] = rep.link_label.empty()
                            ? nlohmann::ordered_json(nullptr)
                            : nlohmann::ordered_json{{"bandwidth_gbps", rep.link.bandwidth_gbps},
                                                     {"latency_us", rep.link.latency_us},
                                                     {"ranks", rep.link.ranks},
                                                     {"node_ranks", rep.link.node_ranks},
                                                     {"intra_gbps", rep.link.intra_gbps},
                                                     {"label", rep.link_label}};
  j["comm_priority"] = to_string(rep.comm_priority);
  j["cpu_threads"] = rep.cpu_threads;
  j["device"] = device_name(rep.device);
  j["peak_rss_per_mode"] = rep.peak_rss_per_mode;
  const BenchLimits& l = rep.limits;
  nlohmann::ordered_json limits{{"device", device_name(l.device)},
                                {"device_summary", l.device_summary},
                                {"collectives_local", l.collectives_local},
                                {"triad_gbps", l.triad_gbps},
                                {"precisions", nlohmann::ordered_json::array()}};
  for (const PrecisionLimits& p : l.precisions) {
    nlohmann::ordered_json pj{{"precision", p.precision}, {"gemm_kernel", p.gemm_kernel},
                              {"gemm_step_s", p.gemm_step_s}, {"optimizer_gbps", p.optimizer_gbps},
                              {"optimizer_bytes_per_element", p.optimizer_bytes_per_element},
                              {"optimizer_vs_triad", p.optimizer_vs_triad},
                              {"gemm", nlohmann::ordered_json::array()}};
    for (const GemmLimit& g : p.gemm) {
      pj["gemm"].push_back({{"pass", g.pass}, {"m", g.m}, {"n", g.n}, {"k", g.k},
                            {"count", g.count}, {"gflops", g.gflops}});
    }
    limits["precisions"].push_back(std::move(pj));
  }
  limits["collectives"] = nlohmann::ordered_json::array();
  for (const CollectiveLimit& c : l.collectives) {
    limits["collectives"].push_back({{"op", c.op}, {"dtype", dtype_name(c.dtype)},
                                     {"bytes", c.bytes}, {"tier", to_string(c.tier)},
                                     {"ranks", c.ranks}, {"members", c.members},
                                     {"stride", c.stride}, {"seconds", c.seconds},
                                     {"algbw_gbps", c.algbw_gbps}, {"busbw_gbps", c.busbw_gbps}});
  }
  j["limits"] = limits;
  j["results"] = nlohmann::ordered_json::array();
  for (const BenchRow& r : rep.rows) {
    nlohmann::ordered_json row = row_scalars(r);
    row.update(nlohmann::ordered_json{
        {"state_bytes", r.state_bytes}, {"planned_state_bytes", r.planned_state_bytes},
        {"optimizer_state_bytes", r.optimizer_state_bytes},
        {"planned_optimizer_state_bytes", r.planned_optimizer_state_bytes},
        {"peak_rss_bytes", r.peak_rss_bytes}, {"step_times_s", r.step_times_s},
        {"bucket_reduction_s", r.bucket_reduction_s}, {"bucket_step_s", r.bucket_step_s},
        {"bucket_broadcast_s", r.bucket_broadcast_s}});
    j["results"].push_back(std::move(row));
  }
  return j;
}

std::string bench_to_csv(const BenchReport& rep) {
  std::string out;
  for (const BenchRow& r : rep.rows) {
    nlohmann::ordered_json row = row_scalars(r);
    row["simulated_link"] = rep.link_label;
    std::vector<std::string> names, cells;
    for (const auto& [key, value] : row.items()) {
      names.push_back(key);
      cells.push_back(csv_cell(value));
    }
    if (out.empty()) out += fmt::format("{}\n", fmt::join(names, ","));  // the header, once
    out += fmt::format("{}\n", fmt::join(cells, ","));
  }
  return out;
}

void write_bench_outputs(const BenchReport& report, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw UserError(fmt::format("cannot create output.dir '{}': {}", dir, ec.message()));
  const auto path = std::filesystem::path(dir);
  replace_whole_file((path / "bench.json").string(), bench_to_json(report).dump(2) + '\n',
                     "the bench results");
  replace_whole_file((path / "bench.csv").string(), bench_to_csv(report), "the bench results");
}

}  // namespace zl
