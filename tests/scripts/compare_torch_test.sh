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
    "^weak scaling 1 -> 2 ranks at $threads2 thread\(s\) per rank" \
    "^1 rank\(s\).*\(gloo, fp32, threads: intra-op $threads1( and 1)?, BLAS $threads1\); zerolap \(GEMM threads per rank: $threads1\)" \
    "^2 rank\(s\).*\(gloo, fp32, threads: intra-op $threads2, BLAS $threads2\); zerolap \(GEMM threads per rank: $threads2\)"; do
  if ! grep -Eq "$want" "$work/smoke.log"; then
    echo "FAIL: no line matching '$want' in:"; cat "$work/smoke.log"; exit 1
  fi
done
cat "$work/smoke.log"
echo PASS
