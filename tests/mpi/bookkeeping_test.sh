#!/usr/bin/env bash
# A run's bookkeeping across a resume and a reshard (docs/guide.md, "Progress lines"): 40 steps on
# 2 ranks, then resumed on 3 ranks to step 70, then the finished run resumed again. The epoch is
# the data consumed (the sampler's cursor, as the checkpoint and the resume message say), not
# (step - 1) / steps per epoch; metrics.csv's elapsed_s never goes back and a finished run
# resumed adds no second final row; progress lines carry elapsed and ETA, the header the
# precision, and the last line names the output files.
# Usage: bookkeeping_test.sh ZEROLAP_BINARY CONFIG WORK_DIR
source "$(dirname "${BASH_SOURCE[0]}")/cli_test_prologue.sh" "$1" "$3"
config=$2
train() {  # train NP STEPS LOG [--set ...]
  local np=$1 steps=$2 log=$3
  shift 3
  mpirun -np "$np" $flags "$zerolap" train "$config" --set train.steps="$steps" \
    --set train.epochs=0 --set train.log_every=10 --set train.eval_every=0 \
    --set "output.dir=\"$work/out\"" --set "checkpoint.dir=\"$work/ck\"" "$@" >"$work/$log" 2>&1 ||
    { cat "$work/$log"; fail "$log: exit $?"; }
}
train 2 40 first.log
train 3 70 reshard.log --set checkpoint.resume=true
train 3 70 again.log --set checkpoint.resume=true
csv=$work/out/metrics.csv

# spirals: 3000 samples; 2 x 32 = 64 per batch, 46 per epoch: step 40 leaves the cursor at 40.
# On 3 ranks (96 per batch, 31 per epoch) the 2560 samples read are batch 26 (+1: a partial one
# is skipped only at an epoch's end; the resume message names it), then 30 more steps: cursor
# 56 or 57, epoch 1.8x. The old (step - 1) / 31 said epoch 2.
grep -q "continuing at batch 2[67] of epoch 0" "$work/reshard.log" || { cat "$work/reshard.log"; fail "no resume note"; }
grep -qE "^step +70/70  epoch 1\.8[0-9]  " "$work/reshard.log" || { cat "$work/reshard.log"; fail "step 70 is not at epoch 1.8x"; }
grep -qE "^final step 70 .*epoch 1\.8[0-9]" "$work/reshard.log" || { cat "$work/reshard.log"; fail "the final line's epoch"; }
[ "$(awk -F, '$1 == 70 { print $2 }' "$csv" | sort -u)" = 1 ] || { cat "$csv"; fail "metrics.csv: step 70 is not in epoch 1"; }
grep -q "epoch 1;" "$work/again.log" || { cat "$work/again.log"; fail "the resume message's epoch differs"; }

# elapsed_s never goes back across the resumes; one final row (test_loss at step 70).
awk -F, 'NR > 1 { if ($10 + 0 < last) { print "elapsed_s goes back at row " NR ": " $0; bad = 1 } last = $10 + 0 }
         END { exit bad }' "$csv" || { cat "$csv"; fail "metrics.csv: elapsed_s goes back"; }
[ "$(awk -F, '$1 == 70 && $5 != ""' "$csv" | wc -l)" -eq 1 ] || { cat "$csv"; fail "metrics.csv: not one final row at step 70"; }

# Progress lines: elapsed on every one, an ETA on every one before the last step; the header.
grep -qE "^step +10/40 .*  elapsed [0-9.]+ s  ETA [0-9.]+ s$" "$work/first.log" || { cat "$work/first.log"; fail "no elapsed / ETA"; }
grep -qE "^step +40/40 .*  elapsed [0-9.]+ s$" "$work/first.log" || { cat "$work/first.log"; fail "the last progress line"; }
grep -qE "^zerolap: training .*\(46 steps per epoch\), mode ddp, fp32" "$work/first.log" || { cat "$work/first.log"; fail "header"; }
grep -qF "outputs: $work/out/metrics.csv, $work/out/config.toml; checkpoint $work/ck/step_00000070.safetensors (latest)" \
  "$work/reshard.log" || { cat "$work/reshard.log"; fail "no line naming the output files"; }
# train.epochs across a reshard: the run ends when the sampler has made that many passes, counted
# from where the checkpoint was, not after epochs x the new steps per epoch from step 0 (which
# ended 2 -> 3 ranks at epoch 1.88, 3 -> 2 at 2.14). 10 steps on 2 ranks read 640 samples, batch
# 7 of 31 on 3 ranks: 55 steps to 2 epochs; 10 on 3 read 960, batch 15 of 46 on 2: 77 steps.
for pair in "2 3 65" "3 2 87"; do
  read -r from to total <<<"$pair"
  train "$from" 10 "epochs_$from.log" --set "output.dir=\"$work/ep$from\"" \
    --set "checkpoint.dir=\"$work/ep$from/ck\""
  train "$to" 0 "epochs_$from$to.log" --set train.epochs=2 --set checkpoint.resume=true \
    --set "output.dir=\"$work/ep$from\"" --set "checkpoint.dir=\"$work/ep$from/ck\""
  grep -qE "^final step $total .*epoch 2\.00" "$work/epochs_$from$to.log" ||
    { cat "$work/epochs_$from$to.log"; fail "2 epochs resumed from $from on $to ranks: not step $total, epoch 2.00"; }
done

# With micro-batches, the epoch's tail of fewer than grad_accum batches is skipped when its last
# step ends: 46 batches of 4 on 2 ranks make 11 steps, and 1 epoch ends at epoch 1.00 (it said
# 0.96, the 44 batches read, until the next step skipped the other 2).
train 2 0 accum.log --set train.epochs=1 --set train.grad_accum=4 \
  --set "output.dir=\"$work/accum\"" --set "checkpoint.dir=\"$work/accum/ck\""
grep -qE "^final step 11 .*epoch 1\.00" "$work/accum.log" ||
  { cat "$work/accum.log"; fail "1 epoch of 4 micro-batches a step: not step 11, epoch 1.00"; }

echo "PASS"
