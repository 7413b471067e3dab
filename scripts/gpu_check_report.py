#!/usr/bin/env python3
"""The report of scripts/gpu_check.sh: the machine, one row per phase run so far, and one short
table per phase from its log (and, for the bench phases, its bench.json). gpu_check.sh rewrites it
after every phase, so a run cut short still leaves a report of what ran.

    scripts/gpu_check_report.py RESULTS_DIR LOGS_DIR > gpu_check.md

RESULTS_DIR holds phases.tsv (name, limit s, result, seconds per line), machine.txt, link_gbps.txt
and bench/, bench_link8/ (bench.json); LOGS_DIR holds NAME.log per phase.
"""
import json
import os
import re
import sys

BEST_ZERO = "zero/interleaved/reduce_broadcast"


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return None


def fence(lines):
    return ["```"] + list(lines) + ["```"]


def catch_summary(log):
    """Catch2's closing line, the failed cases and the WARN-ed skips."""
    out = []
    for line in log.splitlines():
        if line.startswith("All tests passed") or line.startswith("test cases:") or \
                line.startswith("assertions:"):
            out.append(line.strip())
    # Catch2 heads each failure with its test case's name between two lines of dashes.
    lines, failed, current, opening = log.splitlines(), [], None, True
    for i, line in enumerate(lines):
        if re.match(r"^-{20,}$", line):
            if opening and i + 1 < len(lines):
                current = lines[i + 1].strip()
            opening = not opening
        if "FAILED:" in line and current and current not in failed:
            failed.append(current)
    out += [f"failed: {name}" for name in failed[:5]]
    if "no CUDA device visible" in log:
        out.append("CUDA cases skipped: no CUDA device visible")
    return out or ["no Catch2 summary in the log"]


def bandwidth_table(log):
    rows = []
    for m in re.finditer(r"^GPU_BANDWIDTH(_BF16)? (.*)$", log, re.M):
        fields = dict(re.findall(r'(\w+)="?([^" ]+)"?', m.group(2)))
        if m.group(1):
            rows.append(f"| bf16 Adam | {fields.get('adam_bf16_GBps', '?')} | "
                        f"{fields.get('adam_bf16_fraction_of_copy', '?')} | "
                        f"{fields.get('target', '-')} |")
        else:
            rows.append(f"| copy | {fields.get('copy_GBps', '?')} | 1 | - |")
            for key in fields:
                if key.endswith("_GBps") and key != "copy_GBps":
                    frac = fields.get(key.replace("_GBps", "_fraction_of_copy"), "?")
                    rows.append(f"| {key[:-5]} | {fields[key]} | {frac} | - |")
    if not rows:
        return []
    return ["| kernel | GB/s | of copy | target |", "|---|---|---|---|"] + rows


def link_table(log):
    rows = [f"| {m.group(1)} | {m.group(2)} | {m.group(3)} | {m.group(4)} |"
            for m in re.finditer(r"^GPU_LINK (.+?): modelled ([\d.]+) ms, busy ([\d.]+) ms "
                                 r"\(([\d.]+)x\)", log, re.M)]
    if not rows:
        return []
    return ["| link delay | modelled ms | busy ms | ratio (<= 1.1 + 50 us) |", "|---|---|---|---|"] + rows


def bench_table(path):
    text = read(path)
    if text is None:
        return ["no bench.json"]
    bench = json.loads(text)
    ms = lambda s: f"{1e3 * s:.2f}"
    out = ["| prec | mode | step ms | compute ms | ideal ms | predicted ms | step / predicted |",
           "|---|---|---|---|---|---|---|"]
    for r in bench["results"]:
        pred = r.get("predicted_step_s", 0.0)
        out.append(f"| {r['precision']} | {r['mode']} | {ms(r['step_s'])} | {ms(r['compute_s'])} | "
                   f"{ms(r['ideal_step_s'])} | {ms(pred)} | "
                   f"{r['step_s'] / pred if pred > 0 else 0:.2f} |")
    limits = bench.get("limits", {})
    parts = [f"limits on {limits.get('device', '?')}: bandwidth {limits.get('triad_gbps', 0):.0f} GB/s"]
    for p in limits.get("precisions", []):
        parts.append(f"{p['precision']} GEMM floor {1e3 * p['gemm_step_s']:.2f} ms, optimizer "
                     f"{p['optimizer_gbps']:.0f} GB/s ({100 * p.get('optimizer_vs_triad', 0):.0f}%)")
    out.append("")
    out.append("; ".join(parts))
    if bench.get("simulated_link"):
        out.append(f"link: {bench['simulated_link'].get('label', '?')}")
    return out


def torch_table(log):
    rows = [line.rstrip() for line in log.splitlines()
            if re.match(r"^(PyTorch|zerolap) +\S", line) or line.startswith("best:") or
            re.match(r"^ +mode ", line)]
    out = fence(rows) if rows else []
    m = re.search(r"^best: zerolap .*? ([\d.]+) ms vs PyTorch .*: ([\d.]+)x$", log, re.M)
    return out, m


def phase_section(name, status, log, results):
    if log is None:
        return ["no log"]
    lines = []
    if name == "unpack":
        lines = fence([l for l in log.splitlines() if l.startswith(("unpacked", "WARNING"))][:3])
    elif name == "configure":
        keep = [l for l in log.splitlines() if re.search(
            r"zerolap: CUDA backend|CUDA compiler identification|Found MPI_CXX|Found CUDAToolkit|"
            r"CMake Error", l)]
        lines = fence(keep[:6])
    elif name == "prefix_check":
        lines = fence(log.splitlines()[:14])
    elif name == "build":
        errors = [l for l in log.splitlines() if re.search(r"error|Error", l)][:6]
        lines = fence(errors) if errors else ["zerolap, zerolap_tests and zerolap_mpi_tests built"]
    elif name in ("cuda_units", "cuda_train"):
        lines = fence(catch_summary(log))
        extra = bandwidth_table(log) + link_table(log)
        if extra:
            lines += [""] + extra
    elif name in ("bench", "bench_link8"):
        lines = bench_table(os.path.join(results, name, "bench.json"))
        if name == "bench_link8":
            gbps = (read(os.path.join(results, "link_gbps.txt")) or "?").strip()
            lines.insert(0, f"link.ranks = 8 at {gbps} Gb/s (bf16's modelled comm = 0.9x its compute)")
            lines.insert(1, "")
    elif name == "bench_checks":
        # The counts, then every check that did not pass (the log has them all).
        checks = [l for l in log.splitlines() if l.startswith(("PASS", "FAIL", "note"))]
        count = lambda w: sum(1 for l in checks if l.startswith(w))
        lines = [f"{len(checks)} checks: {count('PASS')} passed, {count('FAIL')} failed, "
                 f"{count('note')} noted"] + fence([l for l in checks if not l.startswith("PASS")])
    elif name == "nonfinite":
        lines = fence([l for l in log.splitlines() if l.startswith(("ok ", "FAIL"))])
    elif name.startswith("torch_"):
        table, best = torch_table(log)
        lines = list(table)
        if name == "torch_bf16":
            if best:
                ms, ratio = float(best.group(1)), float(best.group(2))
                lines.append(f"bf16 goal: best {ms:.2f} ms per step (<= 1.5: "
                             f"{'PASS' if ms <= 1.5 else 'FAIL'}), {ratio:.2f}x PyTorch's best "
                             f"(<= 0.8: {'PASS' if ratio <= 0.8 else 'FAIL'})")
            else:
                lines.append("bf16 goal: no comparison")
        if not table:
            lines = fence([l for l in log.splitlines() if l.strip()][-4:]) + lines
    if status != "ok" and name not in ("bench_checks", "nonfinite"):
        tail = [l for l in log.splitlines() if l.strip() and not re.match(r"^-+$", l)][-8:]
        lines += ["", "last lines of the log:"] + fence(tail)
    return lines


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    results, logs = argv[1], argv[2]
    machine = dict(line.split(" ", 1) for line in (read(os.path.join(results, "machine.txt")) or "")
                   .splitlines() if " " in line)
    phases = [line.split("\t") for line in (read(os.path.join(results, "phases.tsv")) or "")
              .splitlines() if line.count("\t") == 3]
    out = ["# zerolap GPU check", "",
           f"{machine.get('date', '?')}, {machine.get('host', '?')}, commit {machine.get('commit', '?')}"]
    if machine.get("rehearsal") == "1":
        out += ["", "**Rehearsal on a CPU machine** (GPU_CHECK_REHEARSAL=1): nothing ran on a GPU; "
                "the CUDA tests skipped, the bench and the non-finite check ran on the CPU with a "
                "small model, and the bench's timing checks are reported, not enforced."]
    out += [""] + fence([f"{k}: {machine[k]}" for k in
                         ("gpu", "nvcc", "cmake", "python", "glibc", "dependencies", "budget")
                         if k in machine])
    out += ["", "| # | phase | limit s | result | s |", "|---|---|---|---|---|"]
    for i, (name, limit, status, seconds) in enumerate(phases):
        out.append(f"| {i} | {name} | {limit} | {status} | {seconds} |")
    for name, _, status, _ in phases:
        log = read(os.path.join(logs, f"{name}.log"))
        if log is None and name == "build":
            log = read(os.path.join(logs, "build.tail.log"))
        out += ["", f"## {name}: {status}", ""] + phase_section(name, status, log, results)
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
