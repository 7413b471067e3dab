#!/usr/bin/env bash
# A run never overwrites another run's outputs (docs/reliability.md, "Runs never overwrite each
# other"): the same command runs twice in a row; a different config into the same output.dir,
# and a resume on another world size into a checkpoint.dir with later checkpoints, are refused
# (exit 2, naming the files and the choices) and leave the files as they were; the overwrite keys
# go ahead; the same for the bench's bench.json and bench.csv. Also the README's two training commands, each run twice, in a fresh directory.
# Usage: run_outputs_test.sh ZEROLAP_BINARY CONFIG WORK_DIR
source "$(dirname "${BASH_SOURCE[0]}")/cli_test_prologue.sh" "$1" "$3"
config=$2
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
train() {  # train RANKS LOG [--set ...]: exit code in $rc
  local ranks=$1 log=$2
  shift 2
  mpirun -np "$ranks" $flags "$zerolap" train "$config" --set train.steps=30 \
    --set train.log_every=10 --set train.eval_every=0 --set "output.dir=\"$work/out\"" \
    --set "checkpoint.dir=\"$work/ck\"" --set checkpoint.every=10 --set checkpoint.keep=5 \
    "$@" >"$work/$log" 2>&1
  rc=$?
}
expect() {  # expect CODE LOG WHAT
  [ "$rc" -eq "$1" ] || { cat "$work/$2"; fail "$3: exit $rc, expected $1"; }
}
meta_world() { grep -ao '"world_size":"[0-9]*"' "$1" | head -1; }

train 2 first.log
expect 0 first.log "a fresh 2-rank run"
train 2 again.log
expect 0 again.log "the same command again"
cp "$work/out/metrics.csv" "$work/metrics.before"

train 2 other.log --set optimizer.lr=0.003
expect 2 other.log "another config into the same directories"
grep -q "checkpoint.dir '$work/ck' holds checkpoints of another run" "$work/other.log" &&
  grep -q "step_00000010.safetensors" "$work/other.log" &&
  grep -q "optimizer.lr" "$work/other.log" && grep -q "checkpoint.overwrite = true" "$work/other.log" ||
  { cat "$work/other.log"; fail "the refusal does not name the checkpoints, the key and the choices"; }
train 2 other_out.log --set optimizer.lr=0.003 --set "checkpoint.dir=\"$work/ck_other\""
expect 2 other_out.log "another config into the same output.dir"
grep -q "output.dir '$work/out' holds the outputs of another run (metrics.csv, config.toml" \
  "$work/other_out.log" && grep -q "output.overwrite = true" "$work/other_out.log" &&
  grep -q -- "--set output.dir=DIR" "$work/other_out.log" ||
  { cat "$work/other_out.log"; fail "the refusal does not name output.dir's files and the choices"; }
cmp -s "$work/out/metrics.csv" "$work/metrics.before" || fail "a refused run changed metrics.csv"

# A branch: resumed from step 10 on 1 rank, the checkpoints of steps 20 and 30 are the 2-rank run's.
branch=(--set "checkpoint.resume=\"$work/ck/step_00000010.safetensors\"")
train 1 branch.log "${branch[@]}"
expect 2 branch.log "a 1-rank branch resumed from step 10"
grep -q "step_00000020.safetensors, step_00000030.safetensors (written on 2 ranks, this run has 1" \
  "$work/branch.log" || { cat "$work/branch.log"; fail "the branch refusal does not name the later checkpoints"; }
[ "$(meta_world "$work/ck/step_00000030.safetensors")" = '"world_size":"2"' ] ||
  fail "the refused branch changed step_00000030.safetensors"
[ "$(cat "$work/ck/latest")" = step_00000030.safetensors ] || fail "the refused branch moved latest"

# The same branch on the same world size and config replaces them with its own (and says so).
train 2 same_branch.log "${branch[@]}"
expect 0 same_branch.log "a 2-rank resume from step 10 of the same run"
grep -q "replaces step_00000020.safetensors, step_00000030.safetensors as it reaches" \
  "$work/same_branch.log" || { cat "$work/same_branch.log"; fail "no note on the later checkpoints"; }

# The explicit keys go ahead.
train 1 branch_overwrite.log "${branch[@]}" --set checkpoint.overwrite=true
expect 0 branch_overwrite.log "the 1-rank branch with checkpoint.overwrite = true"
grep -q "removing 2 checkpoints of another run" "$work/branch_overwrite.log" ||
  { cat "$work/branch_overwrite.log"; fail "no message on the removed checkpoints"; }
[ "$(meta_world "$work/ck/step_00000030.safetensors")" = '"world_size":"1"' ] ||
  fail "step_00000030.safetensors is not the branch's"
train 2 other_overwrite.log --set optimizer.lr=0.003 --set "checkpoint.dir=\"$work/ck_other\"" \
  --set output.overwrite=true
expect 0 other_overwrite.log "another config with output.overwrite = true"
grep -q "^lr = 0.003" "$work/out/config.toml" || fail "config.toml was not replaced"

# The bench: the same command again replaces its own bench.json / bench.csv; another bench into
# that output.dir is refused and leaves them as they were; output.overwrite = true goes ahead.
bench() {  # bench LOG [--set ...]: exit code in $rc
  local log=$1
  shift
  mpirun -np 1 $flags "$zerolap" bench "$config" --set bench.steps=1 --set bench.warmup=0 \
    --set 'bench.modes=["ddp"]' --set 'bench.bucket_cap_mb=[25.0]' \
    --set "output.dir=\"$work/bench\"" "$@" >"$work/$log" 2>&1
  rc=$?
}
bench bench_first.log
expect 0 bench_first.log "a fresh bench"
bench bench_again.log
expect 0 bench_again.log "the same bench again"
cp "$work/bench/bench.json" "$work/bench.before"
bench bench_other.log --set bench.steps=2
expect 2 bench_other.log "another bench into the same output.dir"
grep -q "output.dir '$work/bench' holds the results of another bench (bench.json, bench.csv; its config differs in bench.steps)" \
  "$work/bench_other.log" && grep -q "output.overwrite = true" "$work/bench_other.log" ||
  { cat "$work/bench_other.log"; fail "the bench refusal does not name the files, the key and the choices"; }
cmp -s "$work/bench/bench.json" "$work/bench.before" || fail "a refused bench changed bench.json"
bench bench_overwrite.log --set bench.steps=2 --set output.overwrite=true
expect 0 bench_overwrite.log "another bench with output.overwrite = true"
grep -q '"steps": 2' "$work/bench/bench.json" || fail "bench.json was not replaced"

# The README's two training commands, each twice in a row, from a fresh directory (they write
# runs/... under the current directory); fewer steps, the rest as printed.
mkdir -p "$work/readme" && cd "$work/readme" || fail "no $work/readme"
mapfile -t readme < <(grep -E '^mpirun -np [0-9]+ .*build/zerolap train configs/fashion_mnist_mlp' \
  "$root/README.md" | head -2)
[ "${#readme[@]}" -eq 2 ] || fail "the README's two training commands not found"
for run in 0 1 0 1; do
  command=${readme[$run]/build\/zerolap/$zerolap}
  command=${command/mpirun/mpirun $flags}
  command=${command/configs\//$root/configs/}
  eval "$command --set train.steps=5 --set train.epochs=0" >"$work/readme_$run.log" 2>&1 ||
    { cat "$work/readme_$run.log"; fail "README command failed: ${readme[$run]}"; }
done
echo "PASS"
