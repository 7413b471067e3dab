#!/usr/bin/env bash
# One owner per directory (docs/checkpoints.md, "One owner per directory"): each case of the
# hostile test in the issue that asked for the rule, and the rule's own cases.
#  - The same command twice replaces its own outputs, but not after it stopped short of its last
#    step; a kill between a checkpoint's rename and `latest`, then a resume with a lower lr,
#    proceeds and removes the lineage's later checkpoint.
#  - Refused with exit 2 naming the owning run and the overwrite key, the files left as they were:
#    a second fresh run (another seed) into one checkpoint.dir; a resume from another directory's
#    checkpoint into an owned checkpoint.dir; a resume into another run's output.dir; a fresh run
#    on another world size into an output.dir; a bench (trace on) into a training run's output.dir;
#    a run's checkpoint.dir as another's output.dir (a bench's too) and its output.dir as
#    another's checkpoint.dir, whatever the overwrite keys.
#  - A resume of the owner's lineage on another world size with another lr proceeds, replacing its
#    later checkpoints; a second fine-tune from outside into a checkpoint.dir whose `latest` is
#    past its step is refused (not after a kill before the first `latest`); the overwrite keys go
#    ahead (output.overwrite replaces the other run's outputs, and removes a trace.json it does
#    not write); a garbage run.json or config.toml, and a damaged checkpoint file or sharded manifest,
#    are reported as unreadable; the bench twice; the README's two training commands, each twice.
#  - A run refused after the ownership check (a later start-up check, a checkpoint that does not
#    load, a bench's missing data) leaves run.json and config.toml as they were; a resume path to
#    a directory without a manifest is named as such; a restart with checkpoint.resume = true
#    before the first checkpoint, on another world size, is the same run; one whose `latest` is
#    gone beside the run's checkpoints goes on from the newest.
#  - A fine-tune into its base's output.dir or another fine-tune's, or from the base's step 20 into
#    a checkpoint.dir whose latest is another fine-tune's step 20, is refused; another run's
#    checkpoints copied into an owned checkpoint.dir under names the owner writes are refused, kept.
#  - A checkpoint.dir that is another run's sharded checkpoint, a bench's output.dir inside one,
#    and an output.dir named like a checkpoint in the run's own checkpoint.dir are refused.
#  - A live run's directories are refused to a second launch; without flock, a run warns.
#  - The .partial files a killed trace or bench write left in output.dir go at the next launch.
# Every case runs and reports; the test fails at the end when any did.
# Usage: run_outputs_test.sh ZEROLAP_BINARY CONFIG WORK_DIR
source "$(dirname "${BASH_SOURCE[0]}")/cli_test_prologue.sh" "$1" "$3"
config=$2
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
failures=0
bad() { echo "FAIL: $*"; failures=$((failures + 1)); }
train() {  # train RANKS OUT CK LOG [--set ...]: exit code in $rc
  local ranks=$1 out=$2 ck=$3 log=$4
  shift 4
  mpirun -np "$ranks" $flags "$zerolap" train "$config" --set train.steps=20 \
    --set train.log_every=10 --set train.eval_every=0 --set "output.dir=\"$work/$out\"" \
    --set "checkpoint.dir=\"$work/$ck\"" --set checkpoint.every=10 --set checkpoint.keep=5 \
    "$@" >"$work/$log" 2>&1
  rc=$?
}
expect() {  # expect CODE LOG WHAT: 0 when it held
  [ "$rc" -eq "$1" ] && return 0
  sed 's/^/    /' "$work/$2" | tail -n 15
  bad "$3: exit $rc, expected $1"
  return 1
}
says() {  # says LOG WHAT PATTERN...: every fixed-string pattern is in the log
  local log=$1 what=$2
  shift 2
  for p in "$@"; do
    grep -qF -- "$p" "$work/$log" || { sed 's/^/    /' "$work/$log" | tail -n 15; bad "$what: no '$p'"; return 1; }
  done
}
same() { cmp -s "$work/$1" "$work/$2" || bad "$3"; }
meta() { grep -ao "\"$2\":\"[^\"]*\"" "$work/$1" | head -1 | cut -d'"' -f4; }  # meta FILE KEY
run_id_of() { grep -o '"run_id": "[^"]*"' "$work/$1/run.json" 2>/dev/null | cut -d'"' -f4; }

# The same command twice: its own outputs, its identity kept.
train 2 out ck first.log --set output.trace=true
expect 0 first.log "a fresh 2-rank run"
id_a=$(run_id_of out)
[ -n "$id_a" ] && [ "$(run_id_of ck)" = "$id_a" ] || bad "no run id in out/run.json and ck/run.json"
[ "$(meta ck/step_00000020.safetensors run_id)" = "$id_a" ] || bad "the checkpoint does not name run $id_a"
train 2 out ck again.log --set output.trace=true
expect 0 again.log "the same command again"
[ "$(run_id_of out)" = "$id_a" ] || bad "the same command again changed the run id"
for f in out/metrics.csv out/config.toml out/trace.json ck/latest ck/step_00000010.safetensors \
  ck/step_00000020.safetensors; do cp "$work/$f" "$work/$(echo "$f" | tr / _).before"; done
keep_a() {  # keep_a WHAT: run A's files are as they were
  for f in out/metrics.csv out/config.toml out/trace.json ck/latest ck/step_00000010.safetensors \
    ck/step_00000020.safetensors; do same "$f" "$(echo "$f" | tr / _).before" "$1 changed $f"; done
}

cp "$work/out/run.json" "$work/out_run.json.before"
cp "$work/ck/run.json" "$work/ck_run.json.before"

# A kill between step 20's rename and `latest`, then a resume with a lower lr: its own lineage.
export ZEROLAP_FAULT_CHECKPOINT=after_rename:20
train 2 out_k ck_k kill.log --set train.steps=30
unset ZEROLAP_FAULT_CHECKPOINT
[ "$rc" -ne 0 ] || bad "the simulated crash did not fail the job"
[ "$(cat "$work/ck_k/latest" 2>/dev/null)" = step_00000010.safetensors ] || bad "latest is not step 10 after the crash"
id_k=$(run_id_of ck_k)
# The same command again after it stopped short of its last step would remove the checkpoints and
# start over: refused, naming them and the resume.
cp "$work/ck_k/step_00000020.safetensors" "$work/k20.before"
train 2 out_k ck_k kill_again.log --set train.steps=30
expect 2 kill_again.log "the same command again after a crash" &&
  says kill_again.log "the refused rerun" \
    "run $id_k stopped before its last step (30): checkpoint.dir '$work/ck_k' holds its checkpoints up to step 20" \
    "step_00000010.safetensors, step_00000020.safetensors" "--set checkpoint.resume=true" \
    "checkpoint.overwrite = true"
same ck_k/step_00000020.safetensors k20.before "the refused rerun changed step 20"
train 2 out_k ck_k kill_resume.log --set train.steps=30 --set checkpoint.resume=true \
  --set optimizer.lr=0.003
expect 0 kill_resume.log "a resume after a kill between rename and latest, with a lower lr" &&
  says kill_resume.log "the resume after the kill" \
    "resuming run $id_k from step 10: removing its later checkpoints in '$work/ck_k' (step_00000020.safetensors)"
[ "$(meta ck_k/step_00000030.safetensors run_id)" = "$id_k" ] || bad "the resumed run's checkpoint is not run $id_k's"
dups=$(awk -F, 'NR > 1 && $3 != "" {print $1}' "$work/out_k/metrics.csv" | sort | uniq -d)
[ -z "$dups" ] || bad "metrics.csv has training rows of steps $dups twice"

# Two fresh runs with other seeds and train.steps = 0 into one checkpoint.dir.
train 2 out_s0 ck_s seed0.log --set train.steps=0
expect 0 seed0.log "a fresh run with train.steps = 0"
id_s=$(run_id_of ck_s)
cp "$work/ck_s/step_00000000.safetensors" "$work/s0.before"
train 2 out_s1 ck_s seed1.log --set train.steps=0 --set model.seed=1
expect 2 seed1.log "a second fresh run (another seed) into the same checkpoint.dir" &&
  says seed1.log "the second fresh run's refusal" \
    "checkpoint.dir '$work/ck_s' belongs to another run: run $id_s" "model.seed" \
    "checkpoint.overwrite = true" "step_00000000.safetensors"
same ck_s/step_00000000.safetensors s0.before "the refused run changed step_00000000.safetensors"

# A resume from another directory's checkpoint into checkpoint.dir ck (run A's).
train 2 out_x ck x_into_ck.log --set "checkpoint.resume=\"$work/ck_k/step_00000010.safetensors\""
expect 2 x_into_ck.log "a resume from another directory's checkpoint into an owned checkpoint.dir" &&
  says x_into_ck.log "the refusal" "checkpoint.dir '$work/ck' belongs to another run: run $id_a" \
    "This run resumes run $id_k" "checkpoint.overwrite = true"
keep_a "a resume into another run's checkpoint.dir"

# A resume from a directory without a manifest (a sharded checkpoint's, unfinished) in run A's
# checkpoint.dir: named as such, not taken for a fresh start into another run's directory.
mkdir -p "$work/ck/step_00000015"
train 2 out ck no_manifest.log --set "checkpoint.resume=\"$work/ck/step_00000015\""
expect 2 no_manifest.log "a resume from a directory without manifest.json" &&
  says no_manifest.log "the directory without a manifest" \
    "checkpoint.resume = \"$work/ck/step_00000015\": a directory with neither a manifest.json"
grep -q "belongs to another run" "$work/no_manifest.log" && bad "a resume path without a manifest was taken for a fresh start"
rmdir "$work/ck/step_00000015"
keep_a "a resume from a directory without manifest.json"

# A resume of run A whose checkpoint does not load (another model): refused when it loads, with
# run A's run.json and config.toml as they were (the run takes its directories only after).
train 2 out ck bad_load.log --set checkpoint.resume=true --set 'model.widths=[2, 32, 64, 3]'
expect 2 bad_load.log "a resume into another model" &&
  says bad_load.log "the resume into another model" "layers.0.weight"
same out/run.json out_run.json.before "a resume that did not load changed out/run.json"
keep_a "a resume that did not load"

# A resume whose output.dir is another run's.
train 2 out ck_k k_into_out.log --set train.steps=30 --set checkpoint.resume=true
expect 2 k_into_out.log "a resume into another run's output.dir" &&
  says k_into_out.log "the refusal" "output.dir '$work/out' belongs to another run: run $id_a" \
    "output.overwrite = true"
keep_a "a resume into another run's output.dir"

# checkpoint.resume = true with nothing to resume in its checkpoint.dir, into another run's
# output.dir: refused, saying that the resume found nothing (not that it is a fresh start).
train 2 out ck_none none_into_out.log --set checkpoint.resume=true --set model.seed=7
expect 2 none_into_out.log "a resume with nothing to resume into another run's output.dir" &&
  says none_into_out.log "the refusal" "output.dir '$work/out' belongs to another run: run $id_a" \
    "checkpoint.resume = true found no latest in '$work/ck_none', so nothing to resume" \
    "checkpoint.dir that holds that run's checkpoints"
grep -q "a fresh start" "$work/none_into_out.log" &&
  bad "a resume with nothing to resume called itself a fresh start"
keep_a "a resume with nothing to resume into another run's output.dir"

# A fresh run on another world size into the same output.dir.
train 1 out ck_w world.log --set output.trace=true
expect 2 world.log "a fresh run on another world size into an owned output.dir" &&
  says world.log "the refusal" "output.dir '$work/out' belongs to another run: run $id_a" \
    "it ran on 2 ranks, this run has 1" "output.overwrite = true"
keep_a "a run on another world size"

# zerolap bench with output.trace = true into the training run's output.dir.
bench() {  # bench OUT LOG [--set ...]: exit code in $rc
  local out=$1 log=$2
  shift 2
  mpirun -np 1 $flags "$zerolap" bench "$config" --set bench.steps=1 --set bench.warmup=0 \
    --set 'bench.modes=["ddp"]' --set 'bench.bucket_cap_mb=[25.0]' \
    --set "output.dir=\"$work/$out\"" "$@" >"$work/$log" 2>&1
  rc=$?
}
bench out bench_into_train.log --set output.trace=true
expect 2 bench_into_train.log "a bench into a training run's output.dir" &&
  says bench_into_train.log "the refusal" "output.dir '$work/out' belongs to another run: run $id_a" \
    "it was written by \`zerolap train\`" "output.overwrite = true"
keep_a "a bench into the run's output.dir"

# Run A's checkpoint.dir as another run's output.dir, its output.dir as another run's
# checkpoint.dir, and a bench into its checkpoint.dir: refused whatever the overwrite keys (that
# directory's run.json would name the new run, and run A's next launch would be refused there).
train 2 ck ck_o out_into_ck.log --set model.seed=4 --set output.overwrite=true
expect 2 out_into_ck.log "a fresh run whose output.dir is another run's checkpoint.dir" &&
  says out_into_ck.log "the refusal" "output.dir '$work/ck' is another run's checkpoint.dir: run $id_a" \
    "step_00000010.safetensors" "--set output.dir=DIR"
train 2 out_o out ck_into_out.log --set model.seed=4 --set checkpoint.overwrite=true
expect 2 ck_into_out.log "a fresh run whose checkpoint.dir is another run's output.dir" &&
  says ck_into_out.log "the refusal" "checkpoint.dir '$work/out' is another run's output.dir: run $id_a" \
    "metrics.csv" "--set checkpoint.dir=DIR"
bench ck bench_into_ck.log --set output.overwrite=true
expect 2 bench_into_ck.log "a bench into a training run's checkpoint.dir" &&
  says bench_into_ck.log "the refusal" "output.dir '$work/ck' is another run's checkpoint.dir: run $id_a"
same out/run.json out_run.json.before "a run refused as another run's other directory changed out/run.json"
same ck/run.json ck_run.json.before "a run refused as another run's other directory changed ck/run.json"
keep_a "a run into another run's other directory"

# A run that would take both directories (both overwrite keys) but fails a later start-up check
# (the memory limit), and a bench that would take output.dir but fails reading its data: each
# leaves the directories as they were, so run A's resume below still proceeds.
train 2 out ck late_check.log --set model.seed=3 --set output.overwrite=true \
  --set checkpoint.overwrite=true --set runtime.memory_limit_mb=1
expect 2 late_check.log "a taking run over the memory limit" &&
  says late_check.log "the memory limit" "above runtime.memory_limit_mb = 1"
bench out bench_bad_data.log --set output.overwrite=true --set output.trace=true \
  --set 'data.kind="fashion_mnist"' --set 'model.widths=[784, 16, 10]' \
  --set "data.path=\"$work/no_such_dataset\""
expect 2 bench_bad_data.log "a taking bench without its data files" &&
  says bench_bad_data.log "the missing data" "Fashion-MNIST directory '$work/no_such_dataset' does not exist"
same out/run.json out_run.json.before "a run refused after the ownership check changed out/run.json"
same ck/run.json ck_run.json.before "a run refused after the ownership check changed ck/run.json"
keep_a "a run refused after the ownership check"

# The owner's lineage from step 10 on 1 rank with another lr: proceeds, replaces steps 20.
train 1 out ck branch.log --set optimizer.lr=0.003 \
  --set "checkpoint.resume=\"$work/ck/step_00000010.safetensors\""
expect 0 branch.log "a 1-rank resume of the owner's lineage from step 10 with another lr" &&
  says branch.log "the branch" \
    "resuming run $id_a from step 10: removing its later checkpoints in '$work/ck' (step_00000020.safetensors)"
[ "$(meta ck/step_00000020.safetensors world_size)" = 1 ] || bad "step_00000020 is not the 1-rank resume's"
[ "$(meta ck/step_00000020.safetensors run_id)" = "$id_a" ] || bad "the branch's checkpoint is not run $id_a's"

# Two fine-tunes from one checkpoint of run A's (outside their checkpoint.dir) into one
# checkpoint.dir: both inherit run A's id, so the second removed the first's checkpoints (with one
# line) and exit 0. It is refused now while `latest` names a later checkpoint of the run; with
# checkpoint.overwrite = true it proceeds. Checkpoints later than `latest` (a kill between a rename
# and `latest` at a fine-tune's first checkpoint) are still removed, so the command runs again.
train 2 out_ft1 ck_ft ft1.log --set train.steps=30 \
  --set "checkpoint.resume=\"$work/ck/step_00000010.safetensors\""
expect 0 ft1.log "a fine-tune from run A's step 10 into a new checkpoint.dir"
cp "$work/ck_ft/step_00000030.safetensors" "$work/ft1_30.before"
train 2 out_ft2 ck_ft ft2.log --set train.steps=30 --set optimizer.lr=0.003 \
  --set "checkpoint.resume=\"$work/ck/step_00000010.safetensors\""
expect 2 ft2.log "a second fine-tune from step 10 into the first one's checkpoint.dir" &&
  says ft2.log "the second fine-tune's refusal" \
    "checkpoint.dir '$work/ck_ft' holds run $id_a's checkpoints after step 10, up to step 30 (latest)" \
    "step_00000020.safetensors, step_00000030.safetensors" "--set checkpoint.resume=true" \
    "checkpoint.overwrite = true"
same ck_ft/step_00000030.safetensors ft1_30.before "the refused fine-tune changed the first one's checkpoint"
train 2 out_ft2 ck_ft ft2_overwrite.log --set train.steps=30 --set optimizer.lr=0.003 \
  --set "checkpoint.resume=\"$work/ck/step_00000010.safetensors\"" --set checkpoint.overwrite=true
expect 0 ft2_overwrite.log "the second fine-tune with checkpoint.overwrite = true" &&
  says ft2_overwrite.log "the overwrite" "resuming run $id_a from step 10: removing its later checkpoints in '$work/ck_ft'"
export ZEROLAP_FAULT_CHECKPOINT=after_rename:20
train 2 out_ft3 ck_ft3 ft3_kill.log --set train.steps=30 \
  --set "checkpoint.resume=\"$work/ck/step_00000010.safetensors\""
unset ZEROLAP_FAULT_CHECKPOINT
[ -e "$work/ck_ft3/step_00000020.safetensors" ] && [ ! -e "$work/ck_ft3/latest" ] ||
  bad "the fine-tune killed after its first rename left other files"
train 2 out_ft3 ck_ft3 ft3_again.log --set train.steps=30 \
  --set "checkpoint.resume=\"$work/ck/step_00000010.safetensors\""
expect 0 ft3_again.log "the fine-tune again after a kill before its first latest"

# A resume from outside past train.steps trains nothing, says so, and leaves the state as the new
# checkpoint.dir's checkpoint (a resume there goes on from it, not from step 0).
train 1 out_past ck_past past.log --set train.steps=10 \
  --set "checkpoint.resume=\"$work/ck/step_00000020.safetensors\""
expect 0 past.log "a resume from step 20 with train.steps = 10" &&
  says past.log "the resume past train.steps" "at step 20, at or past the run's last step (10): nothing to train"
[ "$(cat "$work/ck_past/latest" 2>/dev/null)" = step_00000020.safetensors ] ||
  bad "the resume past train.steps left no checkpoint in its checkpoint.dir"

# A fine-tune inherits its base run's id, so the id alone does not tell the base's outputs from a
# fine-tune's: an output.dir follows the checkpoint.dir its run.json names. A fine-tune from step
# 10 (outside its checkpoint.dir) into the base's output.dir, or into another fine-tune's, would
# replace the metrics after step 10 and config.toml: refused, the files as they were. A fine-tune
# from base step 20 into a checkpoint.dir whose latest is another fine-tune's step 20 is refused.
# A fine-tune's resume into its own directories, and a continuation from the base's latest (into
# its output.dir, with a copy of its checkpoint.dir), proceed. Another run's checkpoints copied by
# hand into an owned checkpoint.dir under names the owner writes are refused at start-up, never
# overwritten; one in the other format (a sharded directory where it writes files) is not refused.
train 1 out_l ck_l lin.log
expect 0 lin.log "the base run of the fine-tunes"
id_l=$(run_id_of out_l)
for f in metrics.csv config.toml run.json; do cp "$work/out_l/$f" "$work/l_$f.before"; done
from10="checkpoint.resume=\"$work/ck_l/step_00000010.safetensors\""
train 1 out_l ck_lA ftA_into_base.log --set optimizer.lr=0.003 --set "$from10"
expect 2 ftA_into_base.log "a fine-tune into its base run's output.dir" &&
  says ftA_into_base.log "the fine-tune's refusal" \
    "output.dir '$work/out_l' holds the outputs of another branch of run $id_l" \
    "checkpoint.dir '$work/ck_l'" "latest is step 20" "--set output.dir=DIR" "output.overwrite = true"
for f in metrics.csv config.toml run.json; do
  same "out_l/$f" "l_$f.before" "the fine-tune refused in the base's output.dir changed $f"
done
train 1 out_lA ck_lA ftA.log --set optimizer.lr=0.003 --set "$from10"
expect 0 ftA.log "a fine-tune into new directories"
cp "$work/out_lA/metrics.csv" "$work/lA_metrics.before"
train 1 out_lA ck_lB ftB_into_ftA.log --set "$from10"
expect 2 ftB_into_ftA.log "a second fine-tune into the first one's output.dir" &&
  says ftB_into_ftA.log "the second fine-tune's refusal" \
    "output.dir '$work/out_lA' holds the outputs of another branch of run $id_l" "'$work/ck_lA'"
same out_lA/metrics.csv lA_metrics.before "the refused second fine-tune changed the first one's metrics"
cp "$work/ck_lA/step_00000020.safetensors" "$work/lA_20.before"
train 1 out_lB ck_lA ftB_same_step.log --set train.steps=30 \
  --set "checkpoint.resume=\"$work/ck_l/step_00000020.safetensors\""
expect 2 ftB_same_step.log "a fine-tune from base step 20 into a fine-tune's checkpoint.dir at step 20" &&
  says ftB_same_step.log "the same-step refusal" \
    "checkpoint.dir '$work/ck_lA' holds run $id_l's checkpoints from step 20, up to step 20 (latest)"
same ck_lA/step_00000020.safetensors lA_20.before "the refused fine-tune changed the other's step 20"
[ -e "$work/ck_lA/step_00000030.safetensors" ] && bad "the refused fine-tune wrote into ck_lA"
train 1 out_lA ck_lA ftA_resume.log --set optimizer.lr=0.003 --set checkpoint.resume=true \
  --set train.steps=30
expect 0 ftA_resume.log "a fine-tune's resume = true into its own directories"
cp -r "$work/ck_l" "$work/ck_lC"
train 1 out_l ck_lC continue.log --set train.steps=30 \
  --set "checkpoint.resume=\"$work/ck_l/step_00000020.safetensors\""
expect 0 continue.log "a continuation from the base's latest into its output.dir"
train 1 out_sh ck_sh sharded.log --set train.steps=0 --set model.seed=5 \
  --set 'checkpoint.format="sharded"'
expect 0 sharded.log "a sharded run with train.steps = 0"
id_sh=$(run_id_of ck_sh)
cp "$work/ck_s/step_00000000.safetensors" "$work/ck_lC/step_00000040.safetensors"
cp -r "$work/ck_sh/step_00000000" "$work/ck_lC/step_00000050"
train 1 out_l ck_lC copied.log --set checkpoint.resume=true --set train.steps=50 \
  --set checkpoint.keep=1
expect 2 copied.log "a resume into a checkpoint.dir holding other runs' checkpoints at its steps" &&
  says copied.log "the copied checkpoints' refusal" \
    "step_00000040.safetensors (run $id_s)" "checkpoint.overwrite = true"
grep -q "step_00000050 (run" "$work/copied.log" &&
  bad "a sharded checkpoint was refused where this run writes single files"
same ck_lC/step_00000040.safetensors s0.before "the refused resume changed the copied checkpoint"
[ -e "$work/ck_lC/step_00000050/manifest.json" ] || bad "the copied sharded checkpoint is gone"
# The command that last wrote out_l (the continuation's config, 30 steps) again from step 0, with
# another checkpoint.dir: a rerun (it writes the same metrics), not another branch.
train 1 out_l ck_l2 rerun_other_ck.log --set train.steps=30
expect 0 rerun_other_ck.log "the same command again with another checkpoint.dir"

# A directory that is, or lies inside, a checkpoint is no run's: its run writes and prunes it
# whole. The sharded run's step_00000000 as a checkpoint.dir, a bench's output.dir inside it, and
# an output.dir named like a checkpoint in the run's own (sharded) checkpoint.dir are refused.
ls "$work/ck_sh/step_00000000" >"$work/sh_step.before"
train 2 out_in ck_sh/step_00000000 ck_in_step.log --set train.steps=2 --set model.seed=6
expect 2 ck_in_step.log "a checkpoint.dir that is another run's sharded checkpoint" &&
  says ck_in_step.log "the refusal" \
    "checkpoint.dir '$work/ck_sh/step_00000000' is a sharded checkpoint (it holds manifest.json)" \
    "--set checkpoint.dir=DIR"
bench ck_sh/step_00000000/b bench_in_step.log
expect 2 bench_in_step.log "a bench whose output.dir lies inside a sharded checkpoint" &&
  says bench_in_step.log "the refusal" "output.dir '$work/ck_sh/step_00000000/b' lies inside"
ls "$work/ck_sh/step_00000000" | grep -v '^b$' | cmp -s - "$work/sh_step.before" ||
  bad "a refused run wrote into another run's sharded checkpoint"
train 2 ck_o3/step_00000002 ck_o3 out_is_step.log --set train.steps=2 \
  --set 'checkpoint.format="sharded"'
expect 2 out_is_step.log "an output.dir named like a checkpoint in the run's own checkpoint.dir" &&
  says out_is_step.log "the refusal" \
    "output.dir '$work/ck_o3/step_00000002' is named like a checkpoint in this run's checkpoint.dir '$work/ck_o3'" \
    "--set output.dir=DIR"
[ -e "$work/ck_o3/run.json" ] && bad "the refused run wrote run.json into its checkpoint.dir"

# The overwrite keys give the directory to the new run.
train 2 out_s1 ck_s seed1_overwrite.log --set train.steps=0 --set model.seed=1 \
  --set checkpoint.overwrite=true
expect 0 seed1_overwrite.log "the second fresh run with checkpoint.overwrite = true" &&
  says seed1_overwrite.log "the overwrite" "removing 1 checkpoint of other runs from '$work/ck_s'"
[ "$(run_id_of ck_s)" != "$id_s" ] && [ "$(meta ck_s/step_00000000.safetensors run_id)" = "$(run_id_of ck_s)" ] ||
  bad "checkpoint.overwrite = true did not give ck_s to the new run"
train 1 out ck_w world_overwrite.log --set output.overwrite=true
expect 0 world_overwrite.log "the 1-rank run with output.overwrite = true" &&
  says world_overwrite.log "the overwrite" \
    "output.overwrite = true: run $id_a's outputs in '$work/out': replacing metrics.csv, config.toml; removing trace.json"
grep -q '"world_size": 1' "$work/out/run.json" || bad "out/run.json is not the 1-rank run's"
# The taken run's files go, those this run does not write too: no other run's trace.json stays.
[ -e "$work/out/trace.json" ] && bad "output.overwrite = true left the other run's trace.json"

# A garbage run.json, or a garbage config.toml without one, is unreadable, not another config.
mkdir -p "$work/out_g" "$work/out_h"
printf '\x01garbage{' >"$work/out_g/run.json"
echo "step" >"$work/out_g/metrics.csv"
train 2 out_g ck_g garbage_record.log
expect 2 garbage_record.log "a garbage run.json" &&
  says garbage_record.log "the garbage run.json" "'$work/out_g/run.json' is unreadable"
printf 'x = = \x01\n' >"$work/out_h/config.toml"
echo "step" >"$work/out_h/metrics.csv"
train 2 out_h ck_h garbage_config.log
expect 2 garbage_config.log "a garbage config.toml" &&
  says garbage_config.log "the garbage config.toml" "'$work/out_h/config.toml' is unreadable"
# A config.toml written by hand (the config file itself, in its output.dir) is compared with its
# defaults filled in: the keys it sets otherwise, not every key it leaves out.
mkdir -p "$work/out_hw" && cp "$config" "$work/out_hw/config.toml"
echo "step" >"$work/out_hw/metrics.csv"
train 2 out_hw ck_hw hand_config.log
expect 2 hand_config.log "another config.toml written by hand" &&
  says hand_config.log "the hand-written config.toml" "its config.toml differs in train.eval_every, train.log_every, train.steps"
grep -q "bench.rounds" "$work/hand_config.log" && bad "a key the hand-written config.toml leaves out was named"

# A checkpoint of no known run that cannot be read is named with what is wrong with it: a single
# file's header, a sharded checkpoint's manifest (not "it is a directory").
mkdir -p "$work/ck_u/step_00000010" "$work/ck_v"
printf '\x01garbage{' >"$work/ck_u/step_00000010/manifest.json"
train 2 out_u ck_u unreadable_sharded.log
expect 2 unreadable_sharded.log "a checkpoint.dir holding a damaged sharded checkpoint" &&
  says unreadable_sharded.log "the damaged manifest" "step_00000010 is unreadable" \
    "$work/ck_u/step_00000010/manifest.json"
grep -q "it is a directory" "$work/unreadable_sharded.log" &&
  bad "a damaged sharded checkpoint was named as a directory, not by its manifest"
printf 'junk' >"$work/ck_v/step_00000010.safetensors"
train 2 out_v ck_v unreadable_file.log
expect 2 unreadable_file.log "a checkpoint.dir holding a damaged checkpoint file" &&
  says unreadable_file.log "the damaged file" "step_00000010.safetensors is unreadable" "truncated"

# The bench: the same command again replaces its own results; another bench is refused.
bench bench bench_first.log
expect 0 bench_first.log "a fresh bench"
bench bench bench_again.log
expect 0 bench_again.log "the same bench again"
cp "$work/bench/bench.json" "$work/bench.before"
bench bench bench_other.log --set bench.steps=2
expect 2 bench_other.log "another bench into the same output.dir" &&
  says bench_other.log "the bench refusal" "output.dir '$work/bench' belongs to another run" \
    "its config differs in bench.steps" "output.overwrite = true"
same bench/bench.json bench.before "a refused bench changed bench.json"
bench bench bench_overwrite.log --set bench.steps=2 --set output.overwrite=true
expect 0 bench_overwrite.log "another bench with output.overwrite = true"
grep -q '"steps": 2' "$work/bench/bench.json" || bad "bench.json was not replaced"

# A supervisor's restart before the run's first checkpoint (checkpoint.resume = true with nothing
# to load yet; rank 0 died writing it), on another world size: the same run, from step 0.
export ZEROLAP_FAULT_CHECKPOINT=after_write:20
train 2 out_e ck_e early_crash.log --set checkpoint.resume=true --set checkpoint.every=100
unset ZEROLAP_FAULT_CHECKPOINT
[ "$rc" -ne 0 ] || bad "the crash before the first checkpoint did not fail the job"
id_e=$(run_id_of ck_e)
train 1 out_e ck_e early_restart.log --set checkpoint.resume=true --set checkpoint.every=100
expect 0 early_restart.log "a 1-rank restart before the first checkpoint" &&
  says early_restart.log "the restart before the first checkpoint" "has no checkpoint yet: starting at step 0"
[ -n "$id_e" ] && [ "$(run_id_of out_e)" = "$id_e" ] &&
  [ "$(meta ck_e/step_00000020.safetensors run_id)" = "$id_e" ] ||
  bad "the restart before the first checkpoint is not run $id_e"
# Without `latest` (removed, or a full disk or a crash before it was written) the run's whole
# checkpoints are not "nothing to resume": the restart goes on from the newest, and says so.
rm "$work/ck_e/latest"
train 1 out_e ck_e no_latest.log --set checkpoint.resume=true --set checkpoint.every=100 \
  --set train.steps=30
expect 0 no_latest.log "checkpoint.resume = true without latest beside the run's checkpoints" &&
  says no_latest.log "the restart without latest" \
    "'$work/ck_e' has no \`latest\` (removed, or the run stopped before writing it): resuming from the newest checkpoint of its run, '$work/ck_e/step_00000020.safetensors'" \
    "at step 20"
[ "$(cat "$work/ck_e/latest" 2>/dev/null)" = step_00000030.safetensors ] ||
  bad "the restart without latest did not go on to step 30"
# A branch from step 20 with train.steps = 20 removes step 30 and trains nothing: said so.
train 1 out_e ck_e branch_at_end.log --set checkpoint.every=100 \
  --set "checkpoint.resume=\"$work/ck_e/step_00000020.safetensors\""
expect 0 branch_at_end.log "a branch from step 20 with train.steps = 20" &&
  says branch_at_end.log "the branch that trains nothing" \
    "removing its later checkpoints in '$work/ck_e' (step_00000030.safetensors); this run trains nothing (train.steps = 20)"

# A live run's directories: another launch into either is refused (exit 2 naming the holder),
# whatever its command, and once the run is killed (SIGKILL) nothing stale refuses the next.
train 2 live live_ck live.log --set train.steps=100000000 --set checkpoint.every=1000000 &
live=$!
for _ in $(seq 1 600); do grep -q '^step' "$work/live.log" 2>/dev/null && break; sleep 0.1; done
train 2 live live_ck twin.log --set train.steps=100000000 --set checkpoint.every=1000000
expect 2 twin.log "the same command beside a live run" &&
  says twin.log "the same command beside a live run" "output.dir '$work/live' is in use by a running zerolap (pid"
train 2 other live_ck twin_ck.log
expect 2 twin_ck.log "a run into a live run's checkpoint.dir" &&
  says twin_ck.log "a run into a live run's checkpoint.dir" "checkpoint.dir '$work/live_ck' is in use"
pkill -9 -f "output.dir=.$work/live\"" ; wait "$live" 2>/dev/null
train 2 live live_ck after.log --set output.overwrite=true --set checkpoint.overwrite=true
expect 0 after.log "a run after the live run was killed"

# A trace or bench results killed while being written leave `<name>.partial` (as large as the
# output): the next launch into the directory removes those files (not a link: the user's), also
# when it writes no trace.
train 2 partial partial_ck partial1.log
expect 0 partial1.log "a run before a killed trace write"
head -c 100000 /dev/zero >"$work/partial/trace.json.partial"
head -c 100 /dev/zero >"$work/partial/bench.csv.partial"
ln -s /dev/null "$work/partial/bench.json.partial"
train 2 partial partial_ck partial2.log --set checkpoint.resume=true
if expect 0 partial2.log "a resume after a killed trace write"; then
  [ ! -e "$work/partial/trace.json.partial" ] && [ ! -e "$work/partial/bench.csv.partial" ] ||
    bad "a resume left the .partial files of a killed write: $(ls -A "$work/partial" | tr '\n' ' ')"
  [ -L "$work/partial/bench.json.partial" ] || bad "a resume removed a link named like a .partial file"
fi

# A filesystem without flock (an NFS mount without a lock manager: ENOLCK) cannot guard the
# directories: the run goes on and says so, once per directory. A preloaded flock that fails so
# stands in for one (left out under ASan, whose runtime must be the first library loaded).
if command -v cc >/dev/null && ! ldd "$zerolap" | grep -q libasan; then
  printf '%s\n' '#include <errno.h>' \
    'int flock(int fd, int op) { (void)fd; (void)op; errno = ENOLCK; return -1; }' >"$work/no_flock.c"
  cc -shared -fPIC -o "$work/no_flock.so" "$work/no_flock.c" || fail "cannot build no_flock.so"
  flags="$flags -x LD_PRELOAD=$work/no_flock.so" train 1 nolock nolock_ck nolock.log
  expect 0 nolock.log "a run on a filesystem without flock" &&
    says nolock.log "a run on a filesystem without flock" \
      "output.dir '$work/nolock' cannot be locked (No locks available)" \
      "checkpoint.dir '$work/nolock_ck' cannot be locked"
  [ "$(grep -c "cannot be locked" "$work/nolock.log")" -eq 2 ] ||
    bad "a run without flock did not warn once per directory"
fi

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
    { tail -n 15 "$work/readme_$run.log"; bad "README command failed: ${readme[$run]}"; }
done
[ "$failures" -eq 0 ] || fail "$failures case(s) failed"
echo "PASS"
