#!/usr/bin/env bash
# scripts/compare_torch.py: (1) without PyTorch (a PYTHONPATH shim whose `import torch` fails) it
# exits 2 and says how to install it; (2) where PyTorch is installed, a tiny run at 1 and 2 ranks
# prints both frameworks' rows, gloo's refusal of the ZeRO overlap hooks, the best-mode ratio and
# the weak-scaling line, and that each PyTorch rank ran as many intra-op and BLAS threads as zerolap
# ran GEMM threads (runtime.threads = "auto": the CPUs shared among the ranks), rather than
# OpenBLAS's default of one per core, run from a checkout under a long path; (3) the BLAS check
# refuses a PyTorch GEMM far below zerolap's, naming the package; (4) every line of the report
# fits 100 columns, each figure whole on its line, whatever the paths and figures. Prints PASS or
# FAIL.
# Usage: compare_torch_test.sh ZEROLAP_BINARY SOURCE_DIR WORK_DIR
set -u
zerolap=$1
source_dir=$2
work=$3
python=/usr/bin/python3  # Debian's interpreter, where python3-torch installs PyTorch
rm -rf "$work"
mkdir -p "$work/shim/torch"
echo 'raise ImportError("no module named torch (test shim)")' >"$work/shim/torch/__init__.py"

PYTHONPATH="$work/shim" "$python" "$source_dir/scripts/compare_torch.py" \
  "$source_dir/configs/spirals.toml" --zerolap "$zerolap" >"$work/missing.log" 2>&1
rc=$?
if [ $rc -ne 2 ] || ! grep -q "apt-get install python3-torch" "$work/missing.log"; then
  echo "FAIL: without torch: exit $rc (want 2) and the install hint:"; cat "$work/missing.log"; exit 1
fi
echo "without torch: exit 2 with the install hint"

# The BLAS check: PyTorch's GEMM far below zerolap's at the config's shapes is refused with exit 2
# naming the package (Debian's python3-torch on the reference libblas3); a comparable one passes.
check_blas() {  # TORCH_GFLOPS ZEROLAP_GFLOPS
  "$python" -c "import sys; sys.path.insert(0, '$source_dir/scripts'); import compare_torch as c; \
c.check_gemm_rates($1, $2, 2)" >"$work/blas.log" 2>&1
}
check_blas 6.0 200.0
rc=$?
if [ $rc -ne 2 ] || ! grep -q "apt-get install libopenblas0-pthread" "$work/blas.log" ||
    ! grep -q "PyTorch 6.0 GFLOP/s, zerolap 200.0 GFLOP/s" "$work/blas.log"; then
  echo "FAIL: a slow BLAS: exit $rc (want 2), both rates and the package:"; cat "$work/blas.log"; exit 1
fi
check_blas 90.0 200.0 || { echo "FAIL: a comparable BLAS was refused"; cat "$work/blas.log"; exit 1; }
echo "the BLAS check: a slow PyTorch GEMM refused with the package, a comparable one passes"

# The report fits 100 columns whatever the paths and figures, and each figure stays whole on the
# line it belongs to: a long config path and command (wrapped), the longest mode names of both
# frameworks, figures far wider than usual (a mode's name then goes on a line above its row), a
# refusal, the best line, the weak-scaling line and the GEMM rates.
"$python" - "$source_dir/scripts" >"$work/width.log" 2>&1 <<'PY' || { echo "FAIL: print_world"; cat "$work/width.log"; exit 1; }
import sys
sys.path.insert(0, sys.argv[1])
import compare_torch as c
timed = lambda mode, ms: dict(mode=mode, bucket_cap_mb=25, median_s=ms / 1e3, p10_s=ms / 1e3, p90_s=2 * ms / 1e3)
long_path = "/tmp/" + "a-very-long-directory-name-" * 6 + "/checkout"
c.print_header(long_path + "/configs/spirals.toml", {}, [1, 2, 4, 8, 16, 32])
for wide in (False, True):
    torch_report = dict(torch="2.1.2", backend="gloo", precision="fp32", fused=False,
                        intra_op_threads="2 and 1", blas_threads="2",
                        results=[timed("ddp", 123.45),
                                 timed("ZeroRedundancyOptimizer [intra-op 1]", 99999.99 if wide else 12.5),
                                 dict(mode="hook_with_zero_step",
                                      refused="the gloo backend does not support the hooks " * 5)])
    zl_report = dict(cpu_threads=2, command="mpirun -np 2 --bind-to none " + long_path +
                     "/build/zerolap bench x.toml --set output.dir=" + long_path * 2,
                     results=[dict(mode="zero/after_backward/allreduce_broadcast", bucket_cap_mb=0.25,
                                   step_median_s=1.2345, step_p10_s=1.00025, step_p90_s=2.34575),
                              dict(mode="zero3/after_backward/reduce_scatter_allgather",
                                   bucket_cap_mb=25, step_median_s=123.456 if wide else 0.0123,
                                   step_p10_s=0.01, step_p90_s=1234.5 if wide else 0.02)])
    c.print_world(16, torch_report, zl_report, {}, "cpu",
                  " at 128 thread(s) per rank, as each of 1024 ranks (weak scaling)")
print(c.weak_scaling_line(16, 1024, 128, (timed("ddp", 10), timed("ddp", 10)),
                          (timed("ddp", 11), timed("ddp", 12))))
c.check_gemm_rates(12345.6, 23456.7, 128)
PY
fits() { awk 'length > 100 { print "over 100 columns: " $0; bad = 1 } END { exit bad }' "$1"; }
if fits "$work/width.log" &&
    grep -q "^compare_torch: /tmp/a-very-long-directory-name-" "$work/width.log" &&
    grep -Eq "^zerolap +zero/after_backward/allreduce_broadcast +0.25 +1234.50 +1000.25-2345.75 " "$work/width.log" &&
    grep -Eq "^zerolap +zero3/after_backward/reduce_scatter_allgather +25 +12.30 " "$work/width.log" &&
    grep -Eq "^PyTorch +ZeroRedundancyOptimizer \[intra-op 1\] +25 +12.50 " "$work/width.log" &&
    grep -Eq "^PyTorch +ZeroRedundancyOptimizer \[intra-op 1\] +25 +99999.99 +99999.99-199999.98 +10 +810.04x$" "$work/width.log" &&
    grep -Eq "^zerolap zero3/after_backward/reduce_scatter_allgather$" "$work/width.log" &&
    grep -Eq "^zerolap +\(above\) +25 +123456.00 +10.00-1234500.00 +8 +1000.05x$" "$work/width.log" &&
    grep -Eq "^16 rank\(s\) at 128 thread\(s\) per rank, .* batch 64 per rank,$" "$work/width.log" &&
    grep -Eq "^PyTorch +hook_with_zero_step .*refused on gloo" "$work/width.log" &&
    grep -Eq "^  command: mpirun -np 2 " "$work/width.log" &&
    grep -Eq "^best: zerolap 12.30 ms vs PyTorch 12.50 ms: 0.98x$" "$work/width.log" &&
    grep -Eq "^  zerolap's best: zero3/after_backward/reduce_scatter_allgather \(cap 25\)$" "$work/width.log" &&
    grep -Eq "^weak scaling 16 -> 1024 ranks at 128 thread\(s\) per rank: zerolap 83%, PyTorch 91%$" "$work/width.log" &&
    grep -Eq "(^ *|: )PyTorch 12345.6 GFLOP/s, zerolap 23456.7 GFLOP/s$" "$work/width.log"; then
  echo "the report fits 100 columns, each figure whole on its line"
else
  echo "FAIL: the report is wider than 100 columns or lacks its lines:"; cat "$work/width.log"; exit 1
fi

if ! "$python" -c "import torch.distributed" 2>/dev/null; then
  echo "PyTorch is not installed for $python: the smoke run is skipped"
  echo PASS
  exit 0
fi
threads1=$(nproc)  # runtime.threads = "auto" at 1 and 2 unbound ranks
threads2=$(( threads1 / 2 > 1 ? threads1 / 2 : 1 ))
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# Run from a checkout under a long path (links to this one): the report's header, command and
# table stay within 100 columns and parseable.
long="$work/a-checkout-under-a-very-long-directory-name-$(printf 'x%.0s' $(seq 60))"
mkdir -p "$long/build" && ln -s "$source_dir/scripts" "$long/scripts" &&
  ln -s "$source_dir/configs" "$long/configs" && ln -s "$zerolap" "$long/build/zerolap" ||
  { echo "FAIL: the long checkout path"; exit 1; }
if ! "$python" "$long/scripts/compare_torch.py" "$long/configs/spirals.toml" \
    --world 1,2 --zerolap "$long/build/zerolap" --set bench.warmup=1 --set bench.steps=3 \
    --set 'bench.modes=["ddp","zero/interleaved/reduce_broadcast"]' >"$work/smoke.log" 2>&1; then
  echo "FAIL: the smoke run failed"; cat "$work/smoke.log"; exit 1
fi
for want in "^PyTorch +ddp " "^PyTorch +ZeroRedundancyOptimizer " \
    "^PyTorch +hook_with_zero_step .*refused on gloo" "^zerolap +ddp " \
    "^zerolap +zero/interleaved/reduce_broadcast " \
    "^best: zerolap [0-9.]+ ms vs PyTorch [0-9.]+ ms: [0-9.]+x$" \
    "^weak scaling 1 -> 2 ranks at $threads2 thread\(s\) per"; do
  if ! grep -Eq "$want" "$work/smoke.log"; then
    echo "FAIL: no line matching '$want' in:"; cat "$work/smoke.log"; exit 1
  fi
done
# Each world's header: its PyTorch threads, then zerolap's, on the two lines after it (and after
# the header's continuation lines, indented four spaces).
for w in "1 $threads1( and 1)?" "2 $threads2"; do
  n=${w%% *} t=${w#* }
  awk -v head="^$n rank[(]s[)]" '$0 ~ head { print; left = 2; next }
       left > 0 && !/^    / { print; --left }' "$work/smoke.log" | tr '\n' '|' |
    grep -Eq "\|  PyTorch .*\(gloo, fp32, threads: intra-op $t, BLAS ${t%%(*}\)\|  zerolap \(GEMM threads per rank: ${t%%(*}\)" ||
    { echo "FAIL: the $n-rank header's threads:"; cat "$work/smoke.log"; exit 1; }
done
# The first line names the config; its path, broken where it is too long, joins up again.
config_line=$(awk 'NR == 1 { line = $0; next } /^    / { sub(/^    /, ""); line = line $0; next }
                   { print line; exit }' "$work/smoke.log")
[ "$config_line" = "compare_torch: $long/configs/spirals.toml" ] ||
  { echo "FAIL: the config line: '$config_line'"; cat "$work/smoke.log"; exit 1; }
fits "$work/smoke.log" || { echo "FAIL: the smoke run's report is wider than 100 columns"; exit 1; }
cat "$work/smoke.log"
echo PASS
