#!/usr/bin/env bash
# Crash safety and resharded resume end to end: a crash between a checkpoint's write and its rename
# (and between the rename and the `latest` update) leaves the previous checkpoint loadable and
# `latest` pointing to it; a 4-rank run resumed on 2 ranks finishes with the accuracy of the
# uninterrupted 4-rank run; a job killed with SIGKILL at a random moment leaves a loadable `latest`.
# The crashes use the ZEROLAP_FAULT_CHECKPOINT test hook
# (runtime/checkpoint/files/checkpoint_files.h).
# Usage: checkpoint_crash_test.sh ZEROLAP_BINARY WORK_DIR
source "$(dirname "${BASH_SOURCE[0]}")/cli_test_prologue.sh" "$@"
flags="$flags --mca btl self,vader"
latest() { cat "$work/ckpt/latest" 2>/dev/null; }

# Global batch 64 on 4 ranks x 16 and on 2 ranks x 32: the same samples per step.
cat >"$work/run.toml" <<EOF
[model]
kind = "mlp"
widths = [2, 32, 32, 3]
[data]
kind = "spirals"
train_samples = 960
test_samples = 300
noise = 0.1
batch_size = 16
[optimizer]
kind = "adam"
lr = 0.01
schedule = "cosine"
warmup_steps = 10
[parallel]
mode = "zero"
overlap = "interleaved"
bucket_cap_mb = 0.004
first_bucket_cap_mb = 0.001
[train]
steps = 120
log_every = 40
[checkpoint]
dir = "$work/ckpt"
every = 20
keep = 3
[output]
dir = "$work/out"
EOF
final_accuracy() { awk -F, 'END { print $6 }' "$1/metrics.csv"; }

echo "--- uninterrupted run on 4 ranks"
mpirun -np 4 $flags "$zerolap" train "$work/run.toml" --set "checkpoint.dir=\"$work/ref_ckpt\"" \
  --set "output.dir=\"$work/ref\"" >"$work/ref.log" 2>&1 || { cat "$work/ref.log"; fail "reference run"; }
reference=$(final_accuracy "$work/ref")
echo "reference test_accuracy $reference"

echo "--- 4 ranks, crash after writing step 60's temp file, before its rename"
ZEROLAP_FAULT_CHECKPOINT=after_write:60 mpirun -np 4 $flags -x ZEROLAP_FAULT_CHECKPOINT \
  "$zerolap" train "$work/run.toml" >"$work/crash1.log" 2>&1 && fail "the faulted run exited 0"
grep -q "simulated crash" "$work/crash1.log" || { cat "$work/crash1.log"; fail "the hook did not fire"; }
[ "$(latest)" = "step_00000040.safetensors" ] || fail "latest is '$(latest)', not step 40"
[ ! -e "$work/ckpt/step_00000060.safetensors" ] || fail "the unrenamed step 60 is visible"
"$zerolap" inspect "$work/ckpt/$(latest)" >/dev/null || fail "latest is not loadable"

echo "--- resume on 2 ranks, crash after renaming step 80, before updating latest"
ZEROLAP_FAULT_CHECKPOINT=after_rename:80 mpirun -np 2 $flags -x ZEROLAP_FAULT_CHECKPOINT \
  "$zerolap" train "$work/run.toml" --set checkpoint.resume=true --set data.batch_size=32 \
  >"$work/crash2.log" 2>&1 && fail "the faulted run exited 0"
grep -q "resumed from .*step_00000040.safetensors at step 40" "$work/crash2.log" ||
  { cat "$work/crash2.log"; fail "did not resume from step 40"; }
[ "$(latest)" = "step_00000060.safetensors" ] || fail "latest is '$(latest)', not step 60"
"$zerolap" inspect "$work/ckpt/$(latest)" >/dev/null || fail "latest is not loadable"

echo "--- resume on 2 ranks to the end"
mpirun -np 2 $flags "$zerolap" train "$work/run.toml" --set checkpoint.resume=true \
  --set data.batch_size=32 >"$work/resume.log" 2>&1 || { cat "$work/resume.log"; fail "resume"; }
grep -q "at step 60" "$work/resume.log" || { cat "$work/resume.log"; fail "did not resume from 60"; }
[ "$(latest)" = "step_00000120.safetensors" ] || fail "latest is '$(latest)' after the end"
resumed=$(final_accuracy "$work/out")
echo "resumed test_accuracy $resumed (reference $reference)"
awk -v a="$resumed" -v b="$reference" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.01) }' ||
  fail "accuracy $resumed differs from the uninterrupted $reference"
[ "$(ls "$work/ckpt"/step_*.safetensors | wc -l)" -le 3 ] || fail "more than keep = 3 checkpoints"

echo "--- SIGKILL of every rank at a random moment"
mpirun -np 4 $flags "$zerolap" train "$work/run.toml" --set train.steps=100000000 \
  --set checkpoint.every=5 --set "checkpoint.dir=\"$work/kill\"" --set "output.dir=\"$work/kill\"" \
  --set train.log_every=1000000 >"$work/kill.log" 2>&1 &
job=$!
for _ in $(seq 1 600); do
  name=$(cat "$work/kill/latest" 2>/dev/null)
  [ -n "$name" ] && [ "${name:5:8}" -ge 30 ] 2>/dev/null && break
  sleep 0.1
done
sleep 0.$((RANDOM % 10))
ranks=$(pgrep -P "$job" -f "$zerolap" | tr '\n' ' ')
[ -n "$ranks" ] || { kill -9 "$job"; cat "$work/kill.log"; fail "no rank processes"; }
kill -9 $ranks
wait "$job" 2>/dev/null
name=$(cat "$work/kill/latest") || fail "no latest after the kill"
echo "killed; latest is $name"
"$zerolap" inspect "$work/kill/$name" >/dev/null || fail "latest $name is not loadable after SIGKILL"
step=$((10#${name:5:8}))
mpirun -np 2 $flags "$zerolap" train "$work/run.toml" --set train.steps=$((step + 5)) \
  --set checkpoint.every=5 --set "checkpoint.dir=\"$work/kill\"" --set "output.dir=\"$work/kill\"" \
  --set checkpoint.resume=true --set data.batch_size=32 >"$work/kill_resume.log" 2>&1 ||
  { cat "$work/kill_resume.log"; fail "resume after SIGKILL"; }
grep -q "at step $step" "$work/kill_resume.log" || { cat "$work/kill_resume.log"; fail "resume step"; }
echo "PASS"
