#!/usr/bin/env bash
# scripts/plot_bench.py on the JSON of a real (tiny) `zerolap bench` run with a simulated link:
# it succeeds and writes both charts as PNG files; and each bar's "hidden" label agrees with the
# table's hidden column (1 - exposed / comm, clamped to [0, 1]; no label without communication);
# each bar's segments add up to the step time; without ddp rows, no speed-up chart.
# Usage: plot_bench_test.sh ZEROLAP_BINARY SOURCE_DIR WORK_DIR
set -u
zerolap=$1
source_dir=$2
work=$3
rm -rf "$work"
mkdir -p "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if ! mpirun -np 2 --oversubscribe --bind-to none --mca btl self,vader "$zerolap" bench "$source_dir/configs/spirals.toml" \
    --set 'bench.modes=["ddp","zero/interleaved/reduce_broadcast"]' --set 'bench.bucket_cap_mb=[0.001,1.0]' \
    --set bench.warmup=1 --set bench.steps=2 --set link.bandwidth_gbps=10 \
    --set "output.dir=\"$work\"" >"$work/bench.log" 2>&1; then
  echo "FAIL: zerolap bench failed"; cat "$work/bench.log"; exit 1
fi
if ! /usr/bin/python3 "$source_dir/scripts/plot_bench.py" "$work/bench.json" --out "$work/plots" \
    >"$work/plot.log" 2>&1; then
  echo "FAIL: plot_bench.py failed"; cat "$work/plot.log"; exit 1
fi
for png in bench_step_time.png bench_speedup.png; do
  # A PNG file starts with the 8-byte signature \x89PNG\r\n\x1a\n.
  if [ "$(head -c 4 "$work/plots/$png" 2>/dev/null | tail -c 3)" != "PNG" ]; then
    echo "FAIL: $png is missing or not a PNG"; ls -l "$work/plots"; exit 1
  fi
done
if ! /usr/bin/python3 - "$source_dir/scripts" >"$work/label.log" 2>&1 <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
from plot_bench import hidden_label
assert hidden_label({"comm_model_s": 0.010, "exposed_comm_s": 0.004}) == ", 60% hidden"
assert hidden_label({"comm_model_s": 0.010, "exposed_comm_s": 0.012}) == ", 0% hidden"
assert hidden_label({"comm_model_s": 0.010, "exposed_comm_s": -0.001}) == ", 100% hidden"
assert hidden_label({"comm_model_s": 0.0, "exposed_comm_s": 0.001}) == ""
from plot_bench import phase_ms
# The segments add up to the step time, also where noise put the compute-only twin above it.
for compute, step in ((0.004, 0.006), (0.00123, 0.00057)):
    row = {"compute_forward_s": compute / 4, "compute_backward_s": compute / 2,
           "compute_optimizer_s": compute / 8, "compute_s": compute, "step_s": step}
    assert abs(sum(phase_ms(row)) - 1e3 * step) < 1e-9, (compute, step, phase_ms(row))
PY
then
  echo "FAIL: hidden_label disagrees with the table's hidden column"; cat "$work/label.log"; exit 1
fi
# Results without ddp: the step-time chart alone, saying why, and no earlier speed-up chart left.
/usr/bin/python3 -c 'import json, sys
bench = json.load(open(sys.argv[1]))
bench["results"] = [dict(r, speedup_vs_ddp=None) for r in bench["results"] if r["mode"] != "ddp"]
json.dump(bench, open(sys.argv[2], "w"))' "$work/bench.json" "$work/no_ddp.json"
if ! /usr/bin/python3 "$source_dir/scripts/plot_bench.py" "$work/no_ddp.json" --out "$work/plots" \
    >"$work/no_ddp.log" 2>&1 || ! grep -q "no speed-up chart" "$work/no_ddp.log" ||
    [ -e "$work/plots/bench_speedup.png" ]; then
  echo "FAIL: without ddp rows plot_bench.py did not write the step-time chart alone"
  cat "$work/no_ddp.log"; ls -l "$work/plots"; exit 1
fi
echo "PASS: plot_bench.py wrote both charts, and the step-time chart alone without ddp"
