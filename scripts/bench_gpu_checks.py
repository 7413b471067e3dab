#!/usr/bin/env python3
"""The bench's done-when checks on a GPU (issue: the bench tells the truth on CUDA), for
scripts/gpu_check.sh. Reads the bench.json of a run without a link model and of one with
link.ranks = 8 and a bandwidth whose modelled communication is about the compute time; prints one
table per run and one line per check; exits 1 when a check fails.

  scripts/bench_gpu_checks.py link-bandwidth PLAIN/bench.json     # prints the Gb/s to model
  scripts/bench_gpu_checks.py report PLAIN/bench.json LINKED/bench.json

Checks: the limits were measured on CUDA; forward + backward + optimizer from the streams' events
add up to the measured step within 10% (runs without a link); with the modelled link,
zero/interleaved/reduce_broadcast takes at most 1.25x the compute-only step and
zero/none/reduce_broadcast about compute + the modelled communication (within 15%).
"""
import json
import sys

INTERLEAVED = "zero/interleaved/reduce_broadcast"
NONE = "zero/none/reduce_broadcast"


def load(path):
    with open(path) as f:
        return json.load(f)


def row(bench, mode):
    for r in bench["results"]:
        if r["mode"] == mode:
            return r
    raise SystemExit(f"bench_gpu_checks: no {mode} row in the bench result")


def link_bandwidth(plain):
    """Gb/s at which one step's reduce + broadcast of every bucket, modelled as one of 8 ranks,
    takes the compute-only step of interleaved: 2 (p-1)/p S / B = compute."""
    r = row(plain, INTERLEAVED)
    payload = r["payload_bytes_per_step"] or 4 * plain["parameters"] * 2
    bucket_bytes = payload / 2  # a reduce and a broadcast of each bucket
    seconds = r["compute_s"]
    return 2 * 7 / 8 * bucket_bytes * 8 / seconds / 1e9


def table(bench, title):
    ms = lambda s: f"{1e3 * s:8.2f}"
    lines = [f"### {title}", "```",
             f"{'mode':<36} {'step':>8} {'compute':>8} {'comm':>8} {'exposed':>8} {'hidden':>8} "
             f"{'f+b+o':>6} {'step/(c+comm)':>13}"]
    for r in bench["results"]:
        fbo = r["phases_vs_step"]
        serial = r["compute_s"] + r["comm_model_s"]
        lines.append(f"{r['mode']:<36} {ms(r['step_s'])} {ms(r['compute_s'])} {ms(r['comm_model_s'])} "
                     f"{ms(r['exposed_comm_s'])} {ms(r['hidden_comm_s'])} {100 * fbo:5.0f}% "
                     f"{r['step_s'] / serial if serial > 0 else 0:13.2f}")
    limits = bench["limits"]
    lines.append(f"limits on {limits.get('device', '?')}: bandwidth {limits['triad_gbps']:.0f} GB/s"
                 f"{'; collectives local (1 rank)' if limits.get('collectives_local') else ''}")
    for p in limits["precisions"]:
        lines.append(f"  {p['precision']}: GEMM floor {1e3 * p['gemm_step_s']:.2f} ms/step, "
                     f"fused optimizer {p['optimizer_gbps']:.0f} GB/s")
    link = bench.get("simulated_link")
    if link:
        lines.append(f"*** {link['label']} ***")
    lines.append("```")
    return lines


def report(plain, linked):
    out = table(plain, "bench, no link model (ms per step)") + \
        table(linked, "bench, simulated link as one of 8 ranks (ms per step)")
    checks = []
    checks.append(("limits measured on CUDA",
                   plain["limits"].get("device") == "cuda", plain["limits"].get("device")))
    for r in plain["results"]:
        fbo = r["phases_vs_step"]
        checks.append((f"{r['mode']}: forward + backward + optimizer within 10% of the step",
                       0.9 <= fbo <= 1.1, f"{100 * fbo:.0f}%"))
    il, none = row(linked, INTERLEAVED), row(linked, NONE)
    ratio = il["step_s"] / il["compute_s"]
    checks.append((f"{INTERLEAVED} with the link <= 1.25x its compute-only step", ratio <= 1.25,
                   f"{ratio:.2f}x"))
    serial = none["compute_s"] + none["comm_model_s"]
    ratio = none["step_s"] / serial
    checks.append((f"{NONE} with the link ~ compute + modelled comm (within 15%)",
                   0.85 <= ratio <= 1.15, f"{ratio:.2f}x of {1e3 * serial:.2f} ms"))
    out.append("### checks")
    out.append("```")
    for name, ok, value in checks:
        out.append(f"{'PASS' if ok else 'FAIL'}  {name}: {value}")
    out.append("```")
    print("\n".join(out))
    return all(ok for _, ok, _ in checks)


def main(argv):
    if len(argv) == 3 and argv[1] == "link-bandwidth":
        print(f"{link_bandwidth(load(argv[2])):.6g}")
        return 0
    if len(argv) == 4 and argv[1] == "report":
        return 0 if report(load(argv[2]), load(argv[3])) else 1
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
