#!/usr/bin/env bash
# zerolap's OpenMP wait policy (Note [OpenMP wait policy], runtime/cli/openmp_wait.cpp) as the
# OpenMP runtime of each rank reports it (OMP_DISPLAY_ENV=verbose, printed when libgomp starts):
# without OMP_WAIT_POLICY / GOMP_SPINCOUNT every rank of `mpirun -np 2` ends up passive and the
# training job still runs (MPI starts after the exec); a user's own setting is left alone.
# Usage: openmp_wait_test.sh ZEROLAP_BINARY CONFIG WORK_DIR
source "$(dirname "${BASH_SOURCE[0]}")/cli_test_prologue.sh" "$1" "$3"
config=$2
unset OMP_WAIT_POLICY GOMP_SPINCOUNT
spin_lines() { grep -c "GOMP_SPINCOUNT = '$2'" "$1"; }

# Passive: each rank's libgomp starts twice (before and after the exec), the last one passive.
OMP_DISPLAY_ENV=verbose mpirun -np 2 $flags "$zerolap" train "$config" --set train.steps=3 \
  --set train.epochs=0 --set "output.dir=\"$work/run\"" >"$work/default.log" 2>&1 ||
  { cat "$work/default.log"; fail "2-rank training with zerolap's wait policy failed"; }
[ "$(spin_lines "$work/default.log" 0)" -eq 2 ] ||
  { cat "$work/default.log"; fail "expected both ranks' OpenMP runtimes passive (GOMP_SPINCOUNT 0)"; }
grep -q "^final step 3" "$work/default.log" || { cat "$work/default.log"; fail "no final line"; }

# The user's OMP_WAIT_POLICY wins, and the process is not executed again (one start per rank).
OMP_DISPLAY_ENV=verbose OMP_WAIT_POLICY=active mpirun -np 2 $flags "$zerolap" --version \
  >"$work/active.log" 2>&1 || { cat "$work/active.log"; fail "--version failed"; }
[ "$(grep -c "OMP_WAIT_POLICY = 'ACTIVE'" "$work/active.log")" -eq 2 ] &&
  [ "$(grep -c "GOMP_SPINCOUNT = " "$work/active.log")" -eq 2 ] ||
  { cat "$work/active.log"; fail "a user's OMP_WAIT_POLICY=active was not kept"; }

# So does a user's GOMP_SPINCOUNT.
OMP_DISPLAY_ENV=verbose GOMP_SPINCOUNT=1234 "$zerolap" --version >"$work/spin.log" 2>&1 ||
  fail "--version failed"
[ "$(spin_lines "$work/spin.log" 1234)" -eq 1 ] && [ "$(grep -c "GOMP_SPINCOUNT = " "$work/spin.log")" -eq 1 ] ||
  { cat "$work/spin.log"; fail "a user's GOMP_SPINCOUNT was not kept"; }
echo "PASS"
