#!/usr/bin/env bash
# zerolap leaves OpenMP's wait policy as GNU OpenMP has it (Note [Adaptive CPU team] in
# runtime/cli/cpu_team_governor.cpp: the threads spin, and the team shrinks under load instead),
# as the OpenMP runtime of each rank reports it (OMP_DISPLAY_ENV=verbose, printed when libgomp
# starts): without OMP_WAIT_POLICY / GOMP_SPINCOUNT every rank of `mpirun -np 2` starts once with
# libgomp's spin count and trains; a user's own setting reaches the OpenMP runtime as given.
# Usage: openmp_wait_test.sh ZEROLAP_BINARY CONFIG WORK_DIR
source "$(dirname "${BASH_SOURCE[0]}")/cli_test_prologue.sh" "$1" "$3"
config=$2
unset OMP_WAIT_POLICY GOMP_SPINCOUNT
spin_lines() { grep -c "GOMP_SPINCOUNT = '$2'" "$1"; }

OMP_DISPLAY_ENV=verbose mpirun -np 2 $flags "$zerolap" train "$config" --set train.steps=3 \
  --set train.epochs=0 --set "output.dir=\"$work/run\"" >"$work/default.log" 2>&1 ||
  { cat "$work/default.log"; fail "2-rank training failed"; }
[ "$(spin_lines "$work/default.log" 300000)" -eq 2 ] && [ "$(grep -c "GOMP_SPINCOUNT = " "$work/default.log")" -eq 2 ] ||
  { cat "$work/default.log"; fail "expected each rank's OpenMP runtime to start once, spinning (GOMP_SPINCOUNT 300000)"; }
grep -q "^final step 3" "$work/default.log" || { cat "$work/default.log"; fail "no final line"; }

OMP_DISPLAY_ENV=verbose OMP_WAIT_POLICY=passive "$zerolap" --version >"$work/passive.log" 2>&1 ||
  fail "--version failed"
[ "$(spin_lines "$work/passive.log" 0)" -eq 1 ] || { cat "$work/passive.log"; fail "a user's OMP_WAIT_POLICY=passive was not kept"; }
OMP_DISPLAY_ENV=verbose GOMP_SPINCOUNT=1234 "$zerolap" --version >"$work/spin.log" 2>&1 ||
  fail "--version failed"
[ "$(spin_lines "$work/spin.log" 1234)" -eq 1 ] || { cat "$work/spin.log"; fail "a user's GOMP_SPINCOUNT was not kept"; }
echo "PASS"
