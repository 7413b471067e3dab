#!/usr/bin/env bash
# Divergence at the command line (docs/design.md, "Divergence"), on 2 ranks of a tiny model:
#   sgd      SGD at lr = 1e10 exits 1 naming the step, and writes no non-finite checkpoint;
#   resume   resuming a good run at lr = 1e10 with keep = 3, every = 1 keeps a finite `latest`
#            and does not rotate out every good checkpoint;
#   adam     Adam at lr = 1e10 stays finite (loss ~1e21 here), so by default it trains on; with
#            train.max_loss set it exits 1 naming the step;
#   skip     train.on_nonfinite = "skip_step" skips a step with a NaN input on rank 1 and exits 0;
#   skip_last     a skipped last step is still checkpointed, so a rerun trains nothing;
#   skip_forever  skip_step at lr = 1e10 stops after train.max_consecutive_skips in a row;
#   skip_window   a log window of skipped steps leaves its cells empty;
#   config   bad values and skip_step with interleaved overlap exit 2 naming the key.
# Before the non-finite check these runs exited 0 with NaN checkpoints as `latest`.
# Usage: nonfinite_test.sh ZEROLAP_BINARY WORK_DIR
source "$(dirname "${BASH_SOURCE[0]}")/cli_test_prologue.sh" "$@"

cat >"$work/run.toml" <<TOML
[model]
kind = "mlp"
widths = [8, 32, 4]
seed = 3
[data]
kind = "teacher"
teacher_task = "classification"
teacher_hidden = 16
train_samples = 512
test_samples = 64
batch_size = 8
seed = 5
[optimizer]
kind = "sgd"
lr = 0.05
[train]
steps = 6
log_every = 1
[checkpoint]
every = 1
keep = 3
[runtime]
timeout_s = 60
device = "cpu"
[output]
dir = "$work/out"
TOML

# run NAME ARGS...: the exit code of a 2-rank `zerolap train` writing its outputs to out_NAME (each
# run is another run: they may not share an output.dir); its output in NAME.log.
run() {
  local name=$1
  shift
  timeout 120 mpirun $flags -np 2 "$zerolap" train "$work/run.toml" \
    --set output.dir=\""$work/out_$name"\" "$@" >"$work/$name.log" 2>&1
  echo $?
}
expect_rc() {  # NAME RC EXPECTED
  [ "$2" -eq "$3" ] || { cat "$work/$1.log"; fail "$1: exit code $2, expected $3"; }
}
expect_log() {  # NAME PATTERN (extended regex)
  grep -qE -- "$2" "$work/$1.log" || { cat "$work/$1.log"; fail "$1: no '$2' in the output"; }
}

# Exit 0 when every tensor of the safetensors file is finite; prints the first one that is not.
finite() {
  python3 - "$1" <<'PY'
import array, json, math, struct, sys
with open(sys.argv[1], "rb") as f:
    (n,) = struct.unpack("<Q", f.read(8))
    header = json.loads(f.read(n))
    data = f.read()
for name, t in header.items():
    if name == "__metadata__":
        continue
    begin, end = t["data_offsets"]
    values = array.array("f", data[begin:end])
    if not all(math.isfinite(v) for v in values):
        print(f"{sys.argv[1]}: {name} is not finite")
        sys.exit(1)
PY
}
# Every checkpoint in DIR is finite, and `latest` names one of them.
check_dir() {  # NAME DIR
  local f
  for f in "$2"/step_*.safetensors; do
    [ -e "$f" ] || continue
    finite "$f" || fail "$1: a non-finite checkpoint was written: $f"
  done
  if [ -e "$2/latest" ]; then
    [ -e "$2/$(cat "$2/latest")" ] || fail "$1: latest names a missing file"
  fi
}

# --- sgd: exit 1 naming the step; nothing non-finite written --------------------------------------
rc=$(run sgd --set checkpoint.dir=\""$work/sgd"\" --set optimizer.lr=1e10 --set train.steps=30)
expect_rc sgd "$rc" 1
expect_log sgd "diverged at step [0-9]+: the training loss is not finite"
expect_log sgd "train.on_nonfinite = \"stop\""
check_dir sgd "$work/sgd"
echo "ok: sgd at lr = 1e10 exits 1 naming the step; no non-finite checkpoint"

# --- weight_decay = 1e30: non-finite before the first checkpoint; none to fall back on ------------
# The message said "`latest` still names the last finite checkpoint" when there was none.
rc=$(run wd --set checkpoint.dir=\""$work/wd"\" --set optimizer.kind=\"adam\" \
  --set optimizer.weight_decay=1e30)
expect_rc wd "$rc" 1
expect_log wd "no checkpoint was written before it"
grep -q "still names" "$work/wd.log" && { cat "$work/wd.log"; fail "wd: it names a latest that does not exist"; }
check_dir wd "$work/wd"
echo "ok: diverging before the first checkpoint says that none was written"

# --- resume: a good run, then lr = 1e10 from its latest ---------------------------------------------
rc=$(run good --set checkpoint.dir=\""$work/resume"\")
expect_rc good "$rc" 0
[ "$(cat "$work/resume/latest")" = "step_00000006.safetensors" ] || fail "good: latest is not step 6"
rc=$(run resume --set checkpoint.dir=\""$work/resume"\" --set checkpoint.resume=true \
  --set optimizer.lr=1e10 --set train.steps=30)
expect_rc resume "$rc" 1
expect_log resume "resumed from .*step_00000006"
expect_log resume "diverged at step [0-9]+"
check_dir resume "$work/resume"
[ -e "$work/resume/step_00000006.safetensors" ] || { ls "$work/resume"; fail "resume: the good step 6 was rotated out"; }
echo "ok: resuming at lr = 1e10 exits 1; latest stays finite; the good step 6 is kept"

# --- adam: finite, so not divergence by default; train.max_loss makes a huge loss one --------------
# Adam's step is about lr per parameter whatever the gradient, so at lr = 1e10 the parameters and
# the loss grow huge but stay finite (docs/design.md, "Divergence"): the default check, NaN and
# inf only, lets it run; the finite checkpoints it writes are a state, not a divergence.
rc=$(run adam --set checkpoint.dir=\""$work/adam"\" --set optimizer.kind=\"adam\" \
  --set optimizer.lr=1e10 --set train.steps=30)
expect_rc adam "$rc" 0
expect_log adam "^final step 30 "
check_dir adam "$work/adam"
rc=$(run adam_limit --set checkpoint.dir=\""$work/adam_limit"\" --set optimizer.kind=\"adam\" \
  --set optimizer.lr=1e10 --set train.steps=30 --set train.max_loss=1e6)
expect_rc adam_limit "$rc" 1
expect_log adam_limit "diverged at step 2: the training loss is above train.max_loss = 1e\+06 \([0-9.e+]+ on rank 0, [0-9.e+]+ on rank 1\)"
check_dir adam_limit "$work/adam_limit"
[ "$(cat "$work/adam_limit/latest")" = "step_00000001.safetensors" ] || fail "adam_limit: latest is not step 1"
echo "ok: adam at lr = 1e10 is finite and trains on; with train.max_loss = 1e6 it exits 1 at step 2"

# --- sharded: the checkpoint of step 1 is `latest` after step 2 diverges, sync or async -----------
# An async write of step 1 is still in flight when step 2 diverges: the run commits it (its
# manifest and `latest`) before it ends, as a sync write would have.
for async in false true; do
  name="sharded_async_$async"
  rc=$(run "$name" --set checkpoint.dir=\""$work/$name"\" --set checkpoint.format=\"sharded\" \
    --set checkpoint.async=$async --set optimizer.kind=\"adam\" --set optimizer.lr=1e10 \
    --set train.max_loss=1e6)
  expect_rc "$name" "$rc" 1
  expect_log "$name" "diverged at step 2"
  latest=$(cat "$work/$name/latest" 2>/dev/null)
  [ "$latest" = "step_00000001/manifest.json" ] ||
    { ls -R "$work/$name"; fail "$name: latest is '$latest', not step 1"; }
done
echo "ok: a divergence commits the sharded checkpoint of the last finite step, async or not"

# --- skip: a NaN input on rank 1 at step 3 is skipped on both ranks ---------------------------------
timeout 120 mpirun $flags -x ZEROLAP_FAULT_NONFINITE=3:1 -np 2 "$zerolap" train "$work/run.toml" \
  --set checkpoint.dir=\""$work/skip"\" --set train.on_nonfinite=\"skip_step\" \
  --set output.dir=\""$work/out_skip"\" >"$work/skip.log" 2>&1
expect_rc skip $? 0
expect_log skip "skipped step 3: the training loss is not finite \(nan on rank 1\)"
expect_log skip "final step 6 .*\(1 steps skipped as non-finite\)"
check_dir skip "$work/skip"
grep -q "^on_nonfinite = \"skip_step\"" "$work/out_skip/config.toml" || fail "skip: not in the effective config"
echo "ok: skip_step skips the NaN step and finishes"

# --- skip_last: a skipped last step still ends in a checkpoint of that step ----------------------
# With every = 1, step 5 is in a checkpoint and step 6 (the last) is skipped: its state is step 5's,
# but the run's last checkpoint must be of step 6, or a rerun with resume = true (a requeue) trains
# step 6 again from step 5 instead of finding the run finished. It wrote none before.
timeout 120 mpirun $flags -x ZEROLAP_FAULT_NONFINITE=6:1 -np 2 "$zerolap" train "$work/run.toml" \
  --set checkpoint.dir=\""$work/skip_last"\" --set train.on_nonfinite=\"skip_step\" \
  --set output.dir=\""$work/out_skip_last"\" >"$work/skip_last.log" 2>&1
expect_rc skip_last $? 0
expect_log skip_last "skipped step 6: the training loss is not finite"
latest=$(cat "$work/skip_last/latest" 2>/dev/null)
[ "$latest" = "step_00000006.safetensors" ] ||
  { ls "$work/skip_last"; fail "skip_last: latest is '$latest', not step 6"; }
timeout 120 mpirun $flags -np 2 "$zerolap" train "$work/run.toml" \
  --set checkpoint.dir=\""$work/skip_last"\" --set train.on_nonfinite=\"skip_step\" \
  --set checkpoint.resume=true --set output.dir=\""$work/out_skip_last"\" \
  >"$work/skip_last_again.log" 2>&1
expect_rc skip_last_again $? 0
expect_log skip_last_again "at step 6, at or past the run's last step \(6\): nothing to train"
echo "ok: a skipped last step is checkpointed, and the rerun finds the run finished"

# --- skip forever: resuming the good run at lr = 1e10 with skip_step ------------------------------
# Before train.max_consecutive_skips this exited 0 with 58 of 60 steps skipped, test_loss -nan and
# the good checkpoints rotated out. Now 10 skips in a row (the default) end it as "stop" does.
# Skipped steps change no parameter, so they write no checkpoint that would rotate a good one out.
rc=$(run good_skip --set checkpoint.dir=\""$work/skip_forever"\")
expect_rc good_skip "$rc" 0
rc=$(run skip_forever --set checkpoint.dir=\""$work/skip_forever"\" --set checkpoint.resume=true \
  --set optimizer.lr=1e10 --set train.steps=60 --set train.on_nonfinite=\"skip_step\")
expect_rc skip_forever "$rc" 1
expect_log skip_forever "were all skipped as non-finite .*train.max_consecutive_skips = 10 in a row"
check_dir skip_forever "$work/skip_forever"
[ -e "$work/skip_forever/step_00000006.safetensors" ] || { ls "$work/skip_forever"; fail "skip_forever: the step it resumed from was rotated out"; }
# The skipped steps 10.. (all of them, here) wrote no checkpoint of an unchanged state.
ls "$work/skip_forever" | grep -q '^step_0000001' && { ls "$work/skip_forever"; fail "skip_forever: skipped steps wrote checkpoints"; }
echo "ok: skip_step at lr = 1e10 stops after 10 skips in a row, writing no checkpoint of them"

# An all-skipped log window leaves its loss cells empty; a non-finite final evaluation is exit 1.
# A NaN input on rank 1 at step 2, log_every = 1: step 2's row has no train_loss.
timeout 120 mpirun $flags -x ZEROLAP_FAULT_NONFINITE=2:1 -np 2 "$zerolap" train "$work/run.toml" \
  --set train.on_nonfinite=\"skip_step\" --set train.steps=3 \
  --set output.dir=\""$work/skip_window"\" >"$work/skip_window.log" 2>&1
expect_rc skip_window $? 0
row=$(grep '^2,' "$work/skip_window/metrics.csv" | head -1)
[ "$(echo "$row" | cut -d, -f3)" = "" ] || { cat "$work/skip_window/metrics.csv"; fail "skip_window: the skipped window logged a loss: $row"; }
[ "$(echo "$row" | cut -d, -f4)" = "" ] || { cat "$work/skip_window/metrics.csv"; fail "skip_window: the skipped window logged an accuracy: $row"; }
expect_log skip_window "step +2/3 .*loss - \(every step skipped\)"
# A skipped step still ran forward and backward on its samples: the window's throughput counts
# them (it was 0 samples/s).
awk -v r="$row" 'BEGIN { split(r, c, ","); exit !(c[7] + 0 > 0) }' ||
  { cat "$work/skip_window/metrics.csv"; fail "skip_window: samples_per_s not above 0: $row"; }
expect_log skip_window "step +2/3 .* [1-9][0-9]* samples/s"
echo "ok: a window of skipped steps leaves its loss cells empty and counts its samples"
# With the bound lifted, the issue's run ends with a NaN test loss: exit 1, not 0.
rc=$(run final_nan --set checkpoint.dir=\""$work/final_nan"\" --set optimizer.lr=1e10 \
  --set train.steps=60 --set train.on_nonfinite=\"skip_step\" --set train.max_consecutive_skips=1000)
expect_rc final_nan "$rc" 1
expect_log final_nan "the final evaluation's test loss is not finite"
echo "ok: a final evaluation that is not finite is exit 1"

# --- config: exit 2 naming the key --------------------------------------------------------------------
rc=$(run bad_value --set train.on_nonfinite=\"ignore\")
expect_rc bad_value "$rc" 2
expect_log bad_value "train.on_nonfinite"
rc=$(run bad_bound --set train.max_consecutive_skips=0)
expect_rc bad_bound "$rc" 2
expect_log bad_bound "train.max_consecutive_skips: must be in \[1, "
rc=$(run interleaved --set parallel.mode=\"zero\" --set parallel.overlap=\"interleaved\" \
  --set train.on_nonfinite=\"skip_step\")
expect_rc interleaved "$rc" 2
expect_log interleaved "train.on_nonfinite.*\"skip_step\" cannot be combined with parallel.overlap = \"interleaved\""
echo "ok: bad on_nonfinite values exit 2 naming the key"
echo "PASS"
