#!/usr/bin/env python3
"""The bench's checks for scripts/gpu_check.sh, every expectation from the model the bench itself
prints (docs/bench.md): for each row, `ideal_step_s` (no schedule does better) and
`predicted_step_s` (the scaling model for the row's schedule: ddp overlaps its all-reduces with
the backward left, zero/none its reductions but not its broadcasts, interleaved all but the
last bucket's with backward and stage 3's forward gathers with forward), both
from the row's compute-only time and the collective times the bench measured (with the link
model when one is on). Reads the bench.json of a run without a link model and of one with
link.ranks = 8 (its bf16 rows only); prints one line per check; exits 1 when one fails.

  scripts/bench_gpu_checks.py link-bandwidth PLAIN/bench.json [--precision P] [--mode M] [--ratio R]
      the Gb/s at which row (P, M)'s modelled reduce + broadcast, as one of 8 ranks, take R x its
      compute-only step (defaults bf16, zero/interleaved/reduce_broadcast, 0.9)
  scripts/bench_gpu_checks.py report PLAIN/bench.json LINKED/bench.json [--device cuda]
                                     [--timing enforce|report]

Checks (tolerances stated once, below): the limits were measured on --device; every expected
precision x mode row is there; per row, the step is no faster than its compute-only twin
and no slower than the prediction (plus MODEL_SLACK) - and, reported without failing, no faster
than the ideal (the limits time each collective alone, host waits included); without a
link, where the schedule is serial (ddp, none, after_backward) the phases' busy times add up to the
compute-only step within PHASE_TOL, and in interleaved, whose steps overlap backward, forward +
backward fit within it and forward + backward + optimizer cover it. --timing report prints the
timing checks without failing on them (a rehearsal on a loaded CPU machine).
"""
import argparse
import json
import sys

# Two timed runs of the same work differ by noise: a step may come out this much below its twin.
STEP_NOISE = 0.03
# Above the scaling model: launch gaps between kernels, the delay kernels' own time, and the
# compute slow-down from communication kernels sharing the GPU, none of which the model counts.
MODEL_SLACK = 0.15
# The phases' busy times against the compute-only step (timeline events vs the bracketed time).
PHASE_TOL = 0.10

PRECISIONS = ("fp32", "tf32", "bf16")
MODES = ("ddp", "zero/interleaved/reduce_broadcast")


def load(path):
    with open(path) as f:
        return json.load(f)


def find(bench, precision, mode):
    for r in bench["results"]:
        if r["mode"] == mode and r["precision"] == precision:
            return r
    return None


def link_bandwidth(plain, precision, mode, ratio):
    """2 (p-1)/p of a reduce + broadcast's payload at 8 ranks is 7/8 of it on the wire."""
    r = find(plain, precision, mode)
    if r is None:
        raise SystemExit(f"bench_gpu_checks: no {precision} {mode} row in the bench result")
    if r["compute_s"] <= 0 or r["payload_bytes_per_step"] <= 0:
        raise SystemExit(f"bench_gpu_checks: the {precision} {mode} row has no compute time or payload")
    wire_bits = 7 / 8 * r["payload_bytes_per_step"] * 8
    return wire_bits / (ratio * r["compute_s"]) / 1e9


def serial(mode):
    return "interleaved" not in mode


def row_checks(bench, linked):
    """(name, ok, value, kind) per check of one run's rows; kind: False (structure, always
    enforced), True (timing, enforced unless --timing report) or "info" (printed, never failed).
    The linked run holds the bf16 rows only (its bandwidth is set from bf16's)."""
    out = []
    for precision in ("bf16",) if linked else PRECISIONS:
        for mode in MODES:
            r = find(bench, precision, mode)
            label = f"{precision} {mode}"
            out.append((f"{label}: row present", r is not None, "", False))
            if r is None:
                continue
            step, compute = r["step_s"], r["compute_s"]
            ideal, predicted = r["ideal_step_s"], r.get("predicted_step_s", 0.0)
            out.append((f"{label}: model figures present", compute > 0 and ideal > 0 and predicted >= ideal * (1 - 1e-9),
                        f"compute {1e3 * compute:.3f} ms, ideal {1e3 * ideal:.3f}, predicted {1e3 * predicted:.3f}",
                        False))
            out.append((f"{label}: step >= (1 - {STEP_NOISE}) x its compute-only twin",
                        step >= (1 - STEP_NOISE) * compute, f"{step / compute:.3f}x", True))
            # Reported, never failed: the limits time each collective alone on the host, waits
            # included, so with many small collectives the ideal can exceed what the GPU needs.
            out.append((f"{label}: step >= (1 - {STEP_NOISE}) x ideal (reported only)",
                        step >= (1 - STEP_NOISE) * ideal, f"{step / ideal:.3f}x", "info"))
            out.append((f"{label}: step <= (1 + {MODEL_SLACK}) x predicted",
                        step <= (1 + MODEL_SLACK) * predicted,
                        f"{step / predicted:.3f}x of {1e3 * predicted:.3f} ms", True))
            if linked:
                continue
            f, b, o = r["forward_s"], r["backward_s"], r["optimizer_s"]
            if serial(mode):
                ratio = (f + b + o) / compute
                out.append((f"{label}: forward + backward + optimizer ~ compute-only step "
                            f"(within {PHASE_TOL:.0%})", abs(ratio - 1) <= PHASE_TOL,
                            f"{ratio:.3f}x", True))
            else:
                fb, fbo = (f + b) / compute, (f + b + o) / compute
                out.append((f"{label}: forward + backward <= (1 + {PHASE_TOL}) x compute-only step "
                            f"<= (1 + {PHASE_TOL}) x forward + backward + optimizer",
                            fb <= 1 + PHASE_TOL and fbo >= 1 / (1 + PHASE_TOL),
                            f"{fb:.3f}x, {fbo:.3f}x", True))
    return out


def report(plain, linked, device, enforce_timing):
    checks = [(f"limits measured on {device}", plain["limits"].get("device") == device,
               plain["limits"].get("device"), False),
              ("the linked run models 8 ranks", (linked.get("simulated_link") or {}).get("ranks") == 8,
               (linked.get("simulated_link") or {}).get("label"), False)]
    checks += [(f"no link: {n}", ok, v, t) for n, ok, v, t in row_checks(plain, False)]
    checks += [(f"link.ranks=8: {n}", ok, v, t) for n, ok, v, t in row_checks(linked, True)]
    failed = False
    for name, ok, value, timing in checks:
        enforced = timing is False or (timing is True and enforce_timing)
        word = "PASS" if ok else ("FAIL" if enforced else "note")
        failed |= word == "FAIL"
        print(f"{word}  {name}{': ' + str(value) if value else ''}")
    if not enforce_timing:
        print("note  timing checks reported, not enforced (--timing report)")
    return not failed


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    lb = sub.add_parser("link-bandwidth")
    lb.add_argument("plain")
    lb.add_argument("--precision", default="bf16")
    lb.add_argument("--mode", default="zero/interleaved/reduce_broadcast")
    lb.add_argument("--ratio", type=float, default=0.9)
    rp = sub.add_parser("report")
    rp.add_argument("plain")
    rp.add_argument("linked")
    rp.add_argument("--device", default="cuda")
    rp.add_argument("--timing", choices=("enforce", "report"), default="enforce")
    args = parser.parse_args(argv[1:])
    if args.command == "link-bandwidth":
        print(f"{link_bandwidth(load(args.plain), args.precision, args.mode, args.ratio):.6g}")
        return 0
    return 0 if report(load(args.plain), load(args.linked), args.device,
                       args.timing == "enforce") else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
