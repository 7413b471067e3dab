#!/usr/bin/env bash
# scripts/compare_torch.py: (1) without PyTorch (a PYTHONPATH shim whose `import torch` fails) it
# exits 2 and says how to install it; (2) where PyTorch is installed, a tiny run at 1 and 2 ranks
# prints both frameworks' rows, gloo's refusal of the ZeRO overlap hooks, the best-mode ratio and
# the weak-scaling line, and that each PyTorch rank ran as many intra-op and BLAS threads as zerolap
# ran GEMM threads (runtime.threads = "auto": the CPUs shared among the ranks), rather than
# OpenBLAS's default of one per core; (3) the BLAS check refuses a PyTorch GEMM far below
# zerolap's, naming the package. Prints PASS or FAIL.
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

# The report fits 100 columns: the table with the longest mode names, a refusal, the command.
"$python" - "$source_dir/scripts" >"$work/width.log" 2>&1 <<'PY' || { echo "FAIL: print_world"; cat "$work/width.log"; exit 1; }
import sys
sys.path.insert(0, sys.argv[1])
import compare_torch as c
timed = lambda mode, ms: dict(mode=mode, bucket_cap_mb=25, median_s=ms / 1e3, p10_s=ms / 1e3, p90_s=2 * ms / 1e3)
torch_report = dict(torch="2.1.2", backend="gloo", precision="fp32", fused=False, intra_op_threads="2",
                    blas_threads="2", results=[timed("ddp", 123.45), dict(mode="hook_with_zero_step",
                    refused="the gloo backend does not support the communication hooks this mode needs " * 3)])
zl_report = dict(cpu_threads=2, command="mpirun -np 2 --bind-to none " + "/a/long/path/build/zerolap bench x.toml " * 8,
                 results=[dict(mode="zero/after_backward/allreduce_broadcast", bucket_cap_mb=0.25,
                               step_median_s=1.2345, step_p10_s=1.00025, step_p90_s=2.34575)])
c.print_world(2, torch_report, zl_report, {}, "cpu", " at 1 thread(s) per rank, as each of 8 ranks (weak scaling)")
PY
if awk 'length > 100 { print "over 100 columns: " $0; bad = 1 } END { exit bad }' "$work/width.log" &&
    grep -Eq "^zerolap +zero/after_backward/allreduce_broadcast +0.25 " "$work/width.log" &&
    grep -Eq "^PyTorch +hook_with_zero_step .*refused on gloo" "$work/width.log" &&
    grep -Eq "^  command: mpirun -np 2 " "$work/width.log"; then
  echo "the report fits 100 columns"
else
  echo "FAIL: the report is wider than 100 columns or lacks its rows:"; cat "$work/width.log"; exit 1
fi

if ! "$python" -c "import torch.distributed" 2>/dev/null; then
  echo "PyTorch is not installed for $python: the smoke run is skipped"
  echo PASS
  exit 0
fi
threads1=$(nproc)  # runtime.threads = "auto" at 1 and 2 unbound ranks
threads2=$(( threads1 / 2 > 1 ? threads1 / 2 : 1 ))
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
if ! "$python" "$source_dir/scripts/compare_torch.py" "$source_dir/configs/spirals.toml" \
    --world 1,2 --zerolap "$zerolap" --set bench.warmup=1 --set bench.steps=3 \
    --set 'bench.modes=["ddp","zero/interleaved/reduce_broadcast"]' >"$work/smoke.log" 2>&1; then
  echo "FAIL: the smoke run failed"; cat "$work/smoke.log"; exit 1
fi
for want in "^PyTorch +ddp " "^PyTorch +ZeroRedundancyOptimizer " \
    "^PyTorch +hook_with_zero_step .*refused on gloo" "^zerolap +ddp " \
    "^zerolap +zero/interleaved/reduce_broadcast " "^best: zerolap .* vs PyTorch .*x$" \
    "^weak scaling 1 -> 2 ranks at $threads2 thread\(s\) per"; do
  if ! grep -Eq "$want" "$work/smoke.log"; then
    echo "FAIL: no line matching '$want' in:"; cat "$work/smoke.log"; exit 1
  fi
done
# Each world's header: its PyTorch threads, then zerolap's, on the two lines after it.
for w in "1 $threads1( and 1)?" "2 $threads2"; do
  n=${w%% *} t=${w#* }
  grep -A2 -E "^$n rank\(s\)" "$work/smoke.log" | tr '\n' '|' |
    grep -Eq "\|  PyTorch .*\(gloo, fp32, threads: intra-op $t, BLAS ${t%%(*}\)\|  zerolap \(GEMM threads per rank: ${t%%(*}\)" ||
    { echo "FAIL: the $n-rank header's threads:"; cat "$work/smoke.log"; exit 1; }
done
awk 'length > 100 { print "over 100 columns: " $0; bad = 1 } END { exit bad }' "$work/smoke.log" ||
  { echo "FAIL: the smoke run's report is wider than 100 columns"; exit 1; }
cat "$work/smoke.log"
echo PASS
