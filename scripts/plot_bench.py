#!/usr/bin/python3
"""Plots `zerolap bench` results (bench.json) as PNG charts.

  scripts/plot_bench.py runs/bench_overlap/bench.json [--out DIR]

Writes DIR/bench_step_time.png (per bucket cap, one bar per mode: the compute-only run's forward,
backward, optimizer and other compute, then what the step took beyond it, with the ideal step marked)
and DIR/bench_speedup.png (speed-up over ddp against bucket_cap_mb, one line per mode; only when
the bench measured ddp). DIR defaults to the JSON's directory. Needs matplotlib: Debian's python3-matplotlib (scripts/setup.sh)
for Debian's /usr/bin/python3, which the #! line names (a pyenv or venv python3 does not see it).
"""
import argparse
import json
import os
import sys

try:
    import matplotlib
except ImportError:
    sys.exit("plot_bench: matplotlib is missing: apt-get install python3-matplotlib, and run this "
             "script with /usr/bin/python3")

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

PHASES = [  # (label, colour): the compute-only run split by phase, then what communication adds
    ("forward", "#4c72b0"),
    ("backward", "#55a868"),
    ("optimizer", "#c44e52"),
    ("other compute", "#8c8c8c"),
    ("beyond compute (communication, waits)", "#dd8452"),
]


def phase_ms(row):
    """The stacked segments of one row, in ms per step; they add up to the step time: the compute
    phases, then what the step took beyond its compute-only twin (comm_overhead_s)."""
    fwd = row["compute_forward_s"]
    bwd = row["compute_backward_s"]
    opt = row["compute_optimizer_s"]
    compute = row["compute_s"]
    step = row["step_s"]
    other = max(compute - fwd - bwd - opt, 0.0)  # finish_backward waits, host work; <0 is noise
    # Interleaved steps run on the comm thread, overlapping backward: the phases may sum to more
    # than the compute time; scale them so the bar's compute part is the measured compute time,
    # or the step time where noise put the compute-only twin above it.
    total = fwd + bwd + opt + other
    scale = min(compute, step) / total if total > 0 else 0.0
    beyond = max(step - compute, 0.0)
    return [1e3 * v * scale for v in (fwd, bwd, opt, other)] + [1e3 * beyond]


def title_suffix(bench):
    link = bench.get("simulated_link")
    label = f" - {link['label']}" if link else ""
    return f"{bench['world_size']} ranks, {bench['parameters'] / 1e6:.1f}M parameters{label}"


def hidden_label(row):
    """", 60% hidden": the table's hidden column (1 - exposed / comm), when there is communication."""
    comm = row.get("comm_model_s") or 0.0
    if comm <= 0.0:
        return ""
    return f", {min(1.0, max(0.0, 1.0 - row['exposed_comm_s'] / comm)):.0%} hidden"


def row_name(rows):
    """A row's name in the charts: its mode, prefixed by its precision when bench.precision swept
    several (older bench.json files have no precision: fp32)."""
    several = len({r.get("precision", "fp32") for r in rows}) > 1
    return lambda r: f"{r.get('precision', 'fp32')} {r['mode']}" if several else r["mode"]


def plot_step_time(bench, path):
    rows = bench["results"]
    name = row_name(rows)
    caps = sorted({r["bucket_cap_mb"] for r in rows})
    modes = list(dict.fromkeys(name(r) for r in rows))
    fig, axes = plt.subplots(len(caps), 1, figsize=(10, 1.2 + 0.45 * len(modes) * len(caps)),
                             squeeze=False, sharex=True)
    # Labels sit just right of each bar, offset by a share of the widest bar so sub-millisecond
    # steps keep their labels inside the chart.
    widest_ms = max([sum(phase_ms(r)) for r in rows] + [1e3 * r["ideal_step_s"] for r in rows] + [1e-9])
    for ax, cap in zip(axes[:, 0], caps):
        by_mode = {name(r): r for r in rows if r["bucket_cap_mb"] == cap}
        for y, mode in enumerate(modes):
            row = by_mode.get(mode)
            if row is None:
                continue
            left = 0.0
            for (label, colour), width in zip(PHASES, phase_ms(row)):
                ax.barh(y, width, left=left, color=colour, label=label if y == 0 else None,
                        hatch="//" if label.startswith("beyond") else None, edgecolor="white")
                left += width
            ax.plot(1e3 * row["ideal_step_s"], y, marker="|", color="black", markersize=16,
                    markeredgewidth=2, label="ideal step" if y == 0 else None)
            ax.text(left + 0.01 * widest_ms, y, f"{1e3 * row['step_s']:.3g} ms{hidden_label(row)}",
                    va="center", fontsize=8)
        ax.set_xlim(0, 1.25 * widest_ms)
        ax.set_yticks(range(len(modes)))
        ax.set_yticklabels(modes, fontsize=8)
        ax.invert_yaxis()
        ax.set_title(f"bucket_cap_mb = {cap:g}", fontsize=10)
        ax.grid(axis="x", alpha=0.3)
    axes[-1, 0].set_xlabel("ms per step (max over ranks); labels: measured step time, share of communication hidden")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=6, fontsize=8, frameon=False)
    fig.suptitle("Step time by phase: " + title_suffix(bench), fontsize=11)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_speedup(bench, path):
    """False, writing nothing, when no row has a speed-up (no ddp row at its cap and precision)."""
    rows = bench["results"]
    if all(r["speedup_vs_ddp"] is None for r in rows):
        return False
    name = row_name(rows)
    modes = list(dict.fromkeys(name(r) for r in rows))
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for mode in modes:
        pts = sorted((r["bucket_cap_mb"], r["speedup_vs_ddp"]) for r in rows
                     if name(r) == mode and r["speedup_vs_ddp"] is not None)
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=mode)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xscale("log")
    # A tick at every measured cap, labelled in plain numbers (a log axis alone labels 2x10^0, 3x10^0
    # and may skip a measured cap), and the unit on the axis.
    caps = sorted({r["bucket_cap_mb"] for r in rows})
    ax.set_xticks(caps)
    ax.set_xticklabels([f"{c:g}" for c in caps])
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    ax.set_xlabel("bucket_cap_mb (MiB)")
    ax.set_ylabel("speed-up over ddp (same bucket cap and precision)")
    ax.set_title("Speed-up against bucket size: " + title_suffix(bench), fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bench_json", help="bench.json written by `zerolap bench`")
    parser.add_argument("--out", help="directory for the PNGs (default: next to the JSON)")
    args = parser.parse_args(argv)
    try:
        with open(args.bench_json) as f:
            bench = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        print(f"plot_bench: cannot read {args.bench_json}: {e}", file=sys.stderr)
        return 2
    out = args.out or os.path.dirname(os.path.abspath(args.bench_json))
    os.makedirs(out, exist_ok=True)
    step_png = os.path.join(out, "bench_step_time.png")
    speedup_png = os.path.join(out, "bench_speedup.png")
    plot_step_time(bench, step_png)
    if plot_speedup(bench, speedup_png):
        print(f"wrote {step_png} and {speedup_png}")
        return 0
    if os.path.exists(speedup_png):
        os.remove(speedup_png)  # an earlier bench's chart, which these results do not back
    print(f"wrote {step_png}; no speed-up chart: no row has a ddp row at its bucket cap and "
          "precision (add \"ddp\" to bench.modes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
