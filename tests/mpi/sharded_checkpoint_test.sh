#!/usr/bin/env bash
# Sharded checkpoints from the command line on 2 ranks: `keep` removes whole checkpoints (async
# and sync); `inspect` lists the shards and `consolidate` writes one file; a kill during a shard
# write, between the shards and the manifest and between the manifest and `latest` leaves
# `latest` on the last complete checkpoint, which resumes; a full disk during an async write is
# exit 1 naming the rank and the file; a corrupt or missing shard is exit 2 naming the file; ranks
# that do not share checkpoint.dir are exit 2 at start-up.
# Usage: sharded_checkpoint_test.sh ZEROLAP_BINARY WORK_DIR
source "$(dirname "${BASH_SOURCE[0]}")/cli_test_prologue.sh" "$@"
flags="$flags --mca btl self,vader"

cat >"$work/run.toml" <<EOF2
[model]
kind = "mlp"
widths = [2, 32, 32, 3]
[data]
kind = "spirals"
train_samples = 256
test_samples = 64
batch_size = 8
[optimizer]
kind = "adam"
lr = 0.01
[parallel]
mode = "zero"
collective = "reduce_scatter_allgather"
bucket_cap_mb = 0.004
first_bucket_cap_mb = 0.001
[train]
steps = 8
log_every = 4
[checkpoint]
every = 2
keep = 3
format = "sharded"
async = true
[runtime]
timeout_s = 60
device = "cpu"
[output]
overwrite = true
EOF2

run() {  # NAME CKPT_DIR ARGS...: the exit code of a 2-rank train; output in NAME.log
  local name=$1 dir=$2
  shift 2
  timeout 120 mpirun $flags -np 2 -x ZEROLAP_FAULT_CHECKPOINT "$zerolap" train "$work/run.toml" \
    --set "checkpoint.dir=\"$dir\"" --set "output.dir=\"$work/out_$name\"" "$@" \
    >"$work/$name.log" 2>&1
  echo $?
}
latest() { cat "$1/latest" 2>/dev/null; }
export ZEROLAP_FAULT_CHECKPOINT=

echo "--- an async sharded run: keep, inspect, consolidate"
good=$work/good
rc=$(run good "$good")
[ "$rc" -eq 0 ] || { cat "$work/good.log"; fail "good run: exit $rc"; }
[ "$(latest "$good")" = "step_00000008/manifest.json" ] || fail "latest is '$(latest "$good")'"
[ "$(ls -d "$good"/step_* | wc -l)" -eq 3 ] || { ls "$good"; fail "keep = 3 left another count"; }
[ "$(ls "$good/step_00000008" | wc -l)" -eq 3 ] || { ls "$good/step_00000008"; fail "not 2 shards + manifest"; }
"$zerolap" inspect "$good" >"$work/inspect.log" 2>&1 || { cat "$work/inspect.log"; fail "inspect"; }
[ "$(grep -c ' ok$' "$work/inspect.log")" -eq 2 ] || { cat "$work/inspect.log"; fail "inspect: 2 shards ok"; }
grep -q "^precision fp32 (reduce_dtype fp32, master_weights fp32), mode zero, written on 2 ranks" \
  "$work/inspect.log" || { cat "$work/inspect.log"; fail "inspect: the precision line"; }
"$zerolap" consolidate "$good/step_00000008" "$work/one.safetensors" >"$work/cons.log" 2>&1 ||
  { cat "$work/cons.log"; fail "consolidate"; }
"$zerolap" inspect "$work/one.safetensors" >"$work/inspect1.log" 2>&1 || fail "consolidated file"
grep -q "optimizer.layers.0.weight.exp_avg_sq" "$work/inspect1.log" || fail "no optimizer state"
"$zerolap" consolidate "$good/step_00000008" "$work/params.safetensors" --no-optimizer \
  >"$work/cons2.log" 2>&1 || fail "consolidate --no-optimizer"
grep -q "^layers.0.weight " <("$zerolap" inspect "$work/params.safetensors") || fail "no parameters"
grep -q "optimizer\." <("$zerolap" inspect "$work/params.safetensors" | grep -v "^  ") &&
  fail "--no-optimizer wrote state"
# A parameters-only file cannot resume Adam: exit 2 saying why, not only which tensor is missing.
rc=$(run params_only "$work/params_ck" --set "checkpoint.resume=\"$work/params.safetensors\"")
[ "$rc" -eq 2 ] || { cat "$work/params_only.log"; fail "resume from --no-optimizer: exit $rc"; }
grep -q "parameters only (consolidate --no-optimizer)" "$work/params_only.log" ||
  { cat "$work/params_only.log"; fail "resume from --no-optimizer: not said why"; }
# The checkpoint.dir, or its `latest` pointer, stands for the checkpoint `latest` names, as it
# does for inspect and checkpoint.resume: the same file, and the line saying which it took.
"$zerolap" consolidate "$good" "$work/from_dir.safetensors" >"$work/cons_dir.log" 2>&1 ||
  { cat "$work/cons_dir.log"; fail "consolidate of the checkpoint.dir"; }
grep -q "latest checkpoint .*step_00000008" "$work/cons_dir.log" ||
  { cat "$work/cons_dir.log"; fail "consolidate of the checkpoint.dir: which checkpoint"; }
cmp -s "$work/one.safetensors" "$work/from_dir.safetensors" || fail "checkpoint.dir: another file"
"$zerolap" consolidate "$good/latest" "$work/from_latest.safetensors" >"$work/cons_l.log" 2>&1 ||
  { cat "$work/cons_l.log"; fail "consolidate of the latest pointer"; }
cmp -s "$work/one.safetensors" "$work/from_latest.safetensors" || fail "latest: another file"
# An output that would overwrite the checkpoint, or is no file (named by its type), is refused
# (exit 2) and changes nothing; so is one whose directory does not exist or cannot hold a file,
# named as the output, and an empty one. An existing file is refused without --overwrite, and a
# file of a checkpoint even with it: another step's manifest or shard, a new file in a sharded
# step's directory, a `latest`, a step_N.safetensors beside a `latest`; and a file of a run's
# directory: a run.json or .zerolap.lock anywhere (a new one too), a run's output beside a run.json.
step8="$good/step_00000008"
outs=$work/out_good
sums=$(find "$good" "$outs" -type f | sort | xargs cat | cksum)
mkdir -p "$work/a_dir" && mkfifo "$work/a_fifo" && ln -s one.safetensors "$work/a_link"
cp "$work/one.safetensors" "$work/kept.safetensors"
others=("$step8/../step_00000006/manifest.json" "$good/step_00000006/shard_00000_of_00002.g0.safetensors"
  "$good/step_00000006/new.safetensors" "$good/latest" "$good/step_00000009.safetensors"
  "$good/run.json" "$good/.zerolap.lock" "$outs/run.json" "$outs/metrics.csv" "$outs/config.toml"
  "$work/a_dir/run.json" "$work/a_dir/.zerolap.lock")
for out in "$step8/manifest.json" "$(ls "$step8"/shard_* | head -n 1)" "$step8/new.safetensors" \
    "$work/a_dir" "$work/a_fifo" "$work/a_link" "$work/missing/one.safetensors" "" \
    /proc/one.safetensors "$work/one.safetensors" "${others[@]}"; do
  "$zerolap" consolidate "$step8" "$out" >"$work/cons3.log" 2>&1
  rc=$?
  [ "$rc" -eq 2 ] || { cat "$work/cons3.log"; fail "consolidate into '$out': exit $rc, not 2"; }
  grep -qF "$out" "$work/cons3.log" || { cat "$work/cons3.log"; fail "the error does not name '$out'"; }
  ! grep -q checkpoint.dir "$work/cons3.log" || { cat "$work/cons3.log"; fail "blames checkpoint.dir"; }
  case $out in  # a file that is not regular is named by its type
    */a_dir) type="(it is a directory)" ;;
    */a_fifo) type="(it is a FIFO)" ;;
    */a_link) type="(it is a symbolic link)" ;;
    *) type="" ;;
  esac
  [ -z "$type" ] || grep -qF "$type" "$work/cons3.log" ||
    { cat "$work/cons3.log"; fail "no '$type' for '$out'"; }
done
for out in "${others[@]}"; do
  "$zerolap" consolidate "$step8" "$out" --overwrite >"$work/cons3.log" 2>&1
  rc=$?
  [ "$rc" -eq 2 ] && grep -qF "$out" "$work/cons3.log" ||
    { cat "$work/cons3.log"; fail "consolidate --overwrite into '$out': exit $rc, not 2 naming it"; }
done
[ "$(find "$good" "$outs" -type f | sort | xargs cat | cksum)" = "$sums" ] &&
  [ -z "$(ls -A "$work/a_dir")" ] &&
  [ "$(ls "$step8" | wc -l)" -eq 3 ] && [ "$(ls "$good/step_00000006" | wc -l)" -eq 3 ] ||
  { ls -lR "$good"; fail "a refused consolidate changed a checkpoint"; }
cmp -s "$work/one.safetensors" "$work/kept.safetensors" || fail "a refused consolidate replaced a file"
"$zerolap" consolidate "$step8" "$work/one.safetensors" --overwrite >"$work/cons4.log" 2>&1 ||
  { cat "$work/cons4.log"; fail "consolidate --overwrite of its own earlier output"; }
[ -p "$work/a_fifo" ] || fail "consolidate replaced a FIFO"
[ -L "$work/a_link" ] || fail "consolidate replaced a symbolic link"
[ -z "$(ls "$work" | grep '\.tmp$')" ] || fail "a refused consolidate left a temporary file"
# SIGINT or SIGTERM while consolidate writes (stopped by the fault hook before the file is
# finished, the signal waiting): exit 130 / 143 with neither the output nor its temporary file left behind; a Ctrl-C
# once left OUT.safetensors.tmp, which nothing removes.
for sig in INT TERM; do
  out=$work/stopped_$sig.safetensors
  ZEROLAP_FAULT_STOP=consolidate:0 "$zerolap" consolidate "$step8" "$out" >"$work/cons5.log" 2>&1 &
  job=$!
  for _ in $(seq 1 300); do [[ $(ps -o stat= -p "$job") == T* ]] && break; sleep 0.1; done
  [[ $(ps -o stat= -p "$job") == T* ]] || { kill -9 "$job"; cat "$work/cons5.log"; fail "consolidate did not stop"; }
  [ -e "$out.tmp" ] || { kill -9 "$job"; fail "no temporary file of '$out' at the stop"; }
  kill -"$sig" "$job"
  kill -CONT "$job"
  wait "$job"
  rc=$?
  [ "$rc" -eq "$([ "$sig" = INT ] && echo 130 || echo 143)" ] ||
    { cat "$work/cons5.log"; fail "consolidate after SIG$sig: exit $rc"; }
  [ ! -e "$out" ] && [ ! -e "$out.tmp" ] || { ls "$work"; fail "SIG$sig left a part of '$out'"; }
  grep -q "SIG$sig: consolidate of '$out' stopped (its partial file removed)" "$work/cons5.log" ||
    { cat "$work/cons5.log"; fail "consolidate after SIG$sig: no line saying so"; }
done
echo "ok"

echo "--- inspect refuses the hand-edited manifests that consolidate and train refuse"
# Each edit of step 8's manifest is under its recomputed CRC32, so only the checks of its content
# can refuse it. `inspect` says whether a checkpoint is usable: it runs the loaders' checks, exit 2
# with their message (a fractional piece begin is refused by all three).
edit() {  # NAME PYTHON: a copy of step 8 whose manifest body `m` went through PYTHON; prints it
  local to=$work/edit_$1/step_00000008
  rm -rf "$work/edit_$1" && mkdir -p "$work/edit_$1" && cp -r "$step8" "$to"
  python3 - "$to/manifest.json" "$2" <<'EOP'
import json, sys, zlib
path, code = sys.argv[1], sys.argv[2]
m = json.load(open(path))["manifest"]
exec(code)
body = json.dumps(m, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
json.dump({"crc32": "%08x" % zlib.crc32(body.encode()), "manifest": m}, open(path, "w"))
EOP
  echo "$to"
}
error_line() { grep -m1 "error" "$1"; }
for case in \
    'dupfile|s = m["shards"]; s[1]["file"], s[1]["bytes"], s[1]["crc32"] = s[0]["file"], s[0]["bytes"], s[0]["crc32"]' \
    'step|m["step"] = 7' 'generation|m["generation"] = 1' \
    'state|m["optimizer_state"].append("momentum_buffer")' \
    'fraction|m["shards"][1]["pieces"][0]["begin"] += 0.5'; do
  name=${case%%|*}
  to=$(edit "$name" "${case#*|}") || fail "$name: the edit failed"
  "$zerolap" inspect "$to" >"$work/edit_$name.inspect" 2>&1
  rc=$?
  [ "$rc" -eq 2 ] || { cat "$work/edit_$name.inspect"; fail "$name: inspect exit $rc, not 2"; }
  "$zerolap" consolidate "$to" "$work/edit_$name.safetensors" >"$work/edit_$name.cons" 2>&1
  rc=$?
  [ "$rc" -eq 2 ] || { cat "$work/edit_$name.cons"; fail "$name: consolidate exit $rc, not 2"; }
  [ "$(error_line "$work/edit_$name.inspect")" = "$(error_line "$work/edit_$name.cons")" ] ||
    { cat "$work/edit_$name.inspect" "$work/edit_$name.cons"; fail "$name: not the same message"; }
done
# A state name with control bytes is printed escaped (the summary line, before any shard check).
to=$(edit escape 'm["optimizer_state"][0] += "\x1b[2J"') || fail "escape: the edit failed"
"$zerolap" inspect "$to" >"$work/edit_escape.inspect" 2>&1
! grep -q $'\x1b' "$work/edit_escape.inspect" && grep -qF '\x1b[2J' "$work/edit_escape.inspect" ||
  { cat -v "$work/edit_escape.inspect"; fail "escape: a state name's control bytes reached the output"; }
to=$work/edit_step/step_00000008
rc=$(run edit_step "$work/edit_step_ck" --set "checkpoint.resume=\"$to\"")
[ "$rc" -eq 2 ] || { cat "$work/edit_step.log"; fail "step: train exit $rc, not 2"; }
[ "$(error_line "$work/edit_step.log")" = "$(error_line "$work/edit_step.inspect")" ] ||
  { cat "$work/edit_step.log" "$work/edit_step.inspect"; fail "step: train and inspect differ"; }
echo "ok"

echo "--- a sync sharded run: rank 0 prunes in the background, done before the exit"
sync_dir=$work/sync
rc=$(run sync "$sync_dir" --set checkpoint.async=false)
[ "$rc" -eq 0 ] || { cat "$work/sync.log"; fail "sync run: exit $rc"; }
[ "$(latest "$sync_dir")" = "step_00000008/manifest.json" ] ||
  fail "sync: latest is '$(latest "$sync_dir")'"
[ "$(ls -d "$sync_dir"/step_* | wc -l)" -eq 3 ] ||
  { ls "$sync_dir"; fail "sync: keep = 3 left another count"; }
"$zerolap" inspect "$sync_dir" >"$work/inspect_sync.log" 2>&1 ||
  { cat "$work/inspect_sync.log"; fail "inspect sync"; }
echo "ok"

# A kill at each fault point of step 6 leaves latest on step 4; the resume finishes.
for point in during_write after_write after_rename; do
  echo "--- a kill at $point of step 6"
  dir=$work/$point
  rc=$(ZEROLAP_FAULT_CHECKPOINT=$point:6 run "$point" "$dir")
  [ "$rc" -ne 0 ] || fail "$point: the faulted run exited 0"
  grep -q "simulated crash" "$work/$point.log" || { cat "$work/$point.log"; fail "no crash"; }
  [ "$(latest "$dir")" = "step_00000004/manifest.json" ] || fail "$point: latest '$(latest "$dir")'"
  "$zerolap" inspect "$dir" >/dev/null 2>&1 || fail "$point: latest does not inspect"
  rc=$(run "${point}_resume" "$dir" --set checkpoint.resume=true)
  [ "$rc" -eq 0 ] || { cat "$work/${point}_resume.log"; fail "$point: resume exit $rc"; }
  grep -q "resumed from .*step_00000004/manifest.json at step 4" "$work/${point}_resume.log" ||
    { cat "$work/${point}_resume.log"; fail "$point: did not resume from step 4"; }
  [ "$(latest "$dir")" = "step_00000008/manifest.json" ] || fail "$point: latest after the end"
  cmp <(tail -1 "$work/out_good/metrics.csv" | cut -d, -f1,2,5,6) \
    <(tail -1 "$work/out_${point}_resume/metrics.csv" | cut -d, -f1,2,5,6) >/dev/null ||
    fail "$point: the resumed run's final row differs from the uninterrupted one"
done
echo "ok: every fault point leaves latest on step 4"

echo "--- a full disk during the async write of step 4"
disk=$work/disk
rc=$(run disk_first "$disk" --set train.steps=2)
[ "$rc" -eq 0 ] || { cat "$work/disk_first.log"; fail "disk: first run exit $rc"; }
mkdir -p "$disk/step_00000004"
ln -sf /dev/full "$disk/step_00000004/shard_00001_of_00002.g0.safetensors"
rc=$(run disk "$disk" --set checkpoint.resume=true)
[ "$rc" -eq 1 ] || { cat "$work/disk.log"; fail "disk: exit $rc, expected 1"; }
grep -q "shard '.*step_00000004/shard_00001_of_00002.g0.safetensors' of rank 1 could not be written" \
  "$work/disk.log" || { cat "$work/disk.log"; fail "disk: the message names no rank and file"; }
grep -qiE "no space left|disk full" "$work/disk.log" || { cat "$work/disk.log"; fail "disk: no reason"; }
[ "$(latest "$disk")" = "step_00000002/manifest.json" ] || fail "disk: latest '$(latest "$disk")'"
echo "ok"

echo "--- a corrupt, then a missing shard"
shard=$good/step_00000008/shard_00001_of_00002.g0.safetensors
cp "$shard" "$work/saved"
printf 'X' | dd of="$shard" bs=1 seek=$(( $(stat -c %s "$shard") - 3 )) conv=notrunc 2>/dev/null
rc=$(run corrupt "$good" --set checkpoint.resume=true --set train.steps=10)
[ "$rc" -eq 2 ] || { cat "$work/corrupt.log"; fail "corrupt: exit $rc, expected 2"; }
grep -qF "$shard" "$work/corrupt.log" || { cat "$work/corrupt.log"; fail "corrupt: file not named"; }
rm "$shard"
rc=$(run missing "$good" --set checkpoint.resume=true --set train.steps=10)
[ "$rc" -eq 2 ] || { cat "$work/missing.log"; fail "missing: exit $rc, expected 2"; }
grep -q "shard '$shard' of rank 1 is missing" "$work/missing.log" ||
  { cat "$work/missing.log"; fail "missing: file not named"; }
echo "ok"

echo "--- a checkpoint.dir that the ranks do not share"
# Each rank writes its shard into checkpoint.dir: ranks that see different directories (node-local
# disks; here other paths) are exit 2 at start-up naming the rank and the key, and the check leaves
# no file behind. Before, every step trained and the first checkpoint failed with exit 1.
timeout 120 mpirun $flags -np 1 "$zerolap" train "$work/run.toml" --set "checkpoint.dir=\"$work/local0\"" \
  --set "output.dir=\"$work/out_local\"" : -np 1 "$zerolap" train "$work/run.toml" \
  --set "checkpoint.dir=\"$work/local1\"" --set "output.dir=\"$work/out_local\"" >"$work/local.log" 2>&1
rc=$?
[ "$rc" -eq 2 ] || { cat "$work/local.log"; fail "local: exit $rc, expected 2"; }
grep -qF "needs a checkpoint.dir that every rank shares" "$work/local.log" &&
  grep -qF "error on rank 1 of 2: " "$work/local.log" &&
  grep -qF "this rank does not find in its checkpoint.dir '$work/local1'" "$work/local.log" ||
  { cat "$work/local.log"; fail "local: the message names no rank, key or directory"; }
grep -q "^step " "$work/local.log" && { cat "$work/local.log"; fail "local: it trained"; }
[ -z "$(ls -A "$work/local0" | grep -v '^\.zerolap\.lock$')" ] || { ls -A "$work/local0"; fail "local: a file was left"; }
# A rank that sees the directory but cannot write there (a read-only mount on its node; here a
# private read-only bind mount, where this test may make one) is refused the same way.
mkdir -p "$work/ro_ck"
if unshare -m sh -c "mount --bind '$work/ro_ck' '$work/ro_ck' && mount -o remount,bind,ro '$work/ro_ck'" 2>/dev/null; then
  args=(train "$work/run.toml" --set "checkpoint.dir=\"$work/ro_ck\"" --set "output.dir=\"$work/out_ro\"")
  timeout 120 mpirun $flags -np 1 "$zerolap" "${args[@]}" : -np 1 unshare -m sh -c \
    "mount --bind '$work/ro_ck' '$work/ro_ck' && mount -o remount,bind,ro '$work/ro_ck' && exec \"\$0\" \"\$@\"" \
    "$zerolap" "${args[@]}" >"$work/ro.log" 2>&1
  rc=$?
  [ "$rc" -eq 2 ] || { cat "$work/ro.log"; fail "ro: exit $rc, expected 2"; }
  grep -qF "error on rank 1 of 2: " "$work/ro.log" && grep -qF "this rank cannot write there" "$work/ro.log" ||
    { cat "$work/ro.log"; fail "ro: the message names no rank or reason"; }
  [ -z "$(ls -A "$work/ro_ck" | grep -v '^\.zerolap\.lock$')" ] || { ls -A "$work/ro_ck"; fail "ro: a file was left"; }
else
  echo "note: cannot make a read-only bind mount here; the unwritable-rank case is not run"
fi
echo "ok"
echo PASS
