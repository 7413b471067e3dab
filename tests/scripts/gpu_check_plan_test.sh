#!/usr/bin/env bash
# scripts/gpu_check.sh --plan: the phases in the order of their value (build, CUDA units, CUDA
# training, the bench without and with the link and its checks, the non-finite check, PyTorch in
# bf16), their limits adding up to the printed sum within the default 510 s budget;
# without the bundle no prefix check; GPU_CHECK_PHASE_SCALE scales limits and budget alike; and a
# budget below the sum makes both --plan and a real start exit 2 before writing anything.
# Prints PASS or FAIL.
# Usage: gpu_check_plan_test.sh SOURCE_DIR WORK_DIR
set -u
src=$1
work=$2
rm -rf "$work" && mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
script=$src/scripts/gpu_check.sh

bash "$script" --plan >"$work/plan.txt" 2>&1 || { cat "$work/plan.txt"; fail "--plan exited $?"; }
cat "$work/plan.txt"
order=$(awk '$1 ~ /^[0-9]+$/ {print $2}' "$work/plan.txt" | paste -sd' ')
want="unpack configure prefix_check build cuda_units cuda_train bench bench_link8 bench_checks nonfinite torch_bf16"
[[ "$order" == "$want" ]] || fail "phase order: '$order', want '$want'"
sum=$(awk '$1 ~ /^[0-9]+$/ && $2 != "unpack" {s += $3 + 0} END {print s}' "$work/plan.txt")
grep -q "^sum of the limits after unpacking: $sum s; budget 510 s: within$" "$work/plan.txt" ||
  fail "the printed sum is not the limits' sum ($sum) within 510 s"
((sum <= 510)) || fail "sum $sum > 510"
grep -qE "^3 +build .*not the fuzz targets" "$work/plan.txt" || fail "build names its targets"

GPU_CHECK_USE_SYSTEM=1 bash "$script" --plan >"$work/system.txt" || fail "--plan with the system's packages"
grep -q prefix_check "$work/system.txt" && fail "no prefix check without the bundle"
GPU_CHECK_PHASE_SCALE=3 bash "$script" --plan >"$work/scaled.txt" || fail "--plan scaled"
grep -q "^sum of the limits after unpacking: $((3 * sum)) s; budget $((3 * 510)) s (GPU_CHECK_PHASE_SCALE=3): within$" \
  "$work/scaled.txt" || { cat "$work/scaled.txt"; fail "the scale applies to limits and budget"; }

GPU_CHECK_BUDGET_S=$((sum - 1)) bash "$script" --plan >"$work/over.txt" 2>&1
rc=$?
((rc == 2)) && grep -q "EXCEEDED" "$work/over.txt" || fail "--plan over budget: exit $rc, want 2 and EXCEEDED"
GPU_CHECK_BUDGET_S=$((sum - 1)) OUT="$work/out" GPU_CHECK_WORK="$work/w" bash "$script" >"$work/start.txt" 2>&1
rc=$?
((rc == 2)) && grep -q "not starting" "$work/start.txt" || { cat "$work/start.txt"; fail "a start over budget: exit $rc, want 2"; }
[[ ! -e "$work/out" && ! -e "$work/w" ]] || fail "a refused start wrote files"
bash "$script" --bogus >/dev/null 2>&1
(($? == 2)) || fail "an unknown argument exits 2"
echo PASS
