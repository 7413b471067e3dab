#!/usr/bin/env bash
# Writes that fail (a full filesystem) end a 2-rank run with exit 1 naming the file, leave no
# temporary file and never touch `latest`. A file whose name is a link to /dev/full fails every
# write with ENOSPC, as a full disk does; where this test may mount, output.dir is also a real
# 16 KiB tmpfs that fills up mid-run. Before the checks the metrics case exited 0 with metrics.csv
# ending mid-row and no final evaluation row.
# Usage: full_disk_test.sh ZEROLAP_BINARY WORK_DIR
source "$(dirname "${BASH_SOURCE[0]}")/cli_test_prologue.sh" "$@"

cat >"$work/run.toml" <<TOML
[model]
widths = [2, 16, 3]
[data]
kind = "spirals"
train_samples = 256
test_samples = 64
batch_size = 8
[optimizer]
kind = "sgd"
lr = 0.05
[train]
steps = 6
log_every = 1
[runtime]
timeout_s = 60
device = "cpu"
TOML

run() {  # NAME ARGS...: the exit code of a 2-rank `zerolap train`; its output in NAME.log
  local name=$1
  shift
  # output.overwrite: the files made to fail below are not another run's outputs.
  timeout 120 mpirun $flags -np 2 "$zerolap" train "$work/run.toml" --set output.overwrite=true \
    "$@" >"$work/$name.log" 2>&1
  echo $?
}
expect_failure() {  # NAME RC FILE: exit 1 naming FILE
  [ "$2" -eq 1 ] || { cat "$work/$1.log"; fail "$1: exit code $2, expected 1"; }
  grep -qF -- "$3" "$work/$1.log" || { cat "$work/$1.log"; fail "$1: the message does not name $3"; }
  grep -qiE "no space left|disk full" "$work/$1.log" || { cat "$work/$1.log"; fail "$1: no reason"; }
}
full_at() {  # PATH: writes to PATH fail with ENOSPC
  mkdir -p "$(dirname "$1")"
  ln -sf /dev/full "$1"
}

# metrics.csv, the effective config and the trace.
full_at "$work/metrics/metrics.csv"
expect_failure metrics "$(run metrics --set output.dir=\""$work/metrics"\")" "$work/metrics/metrics.csv"
full_at "$work/config/config.toml"
expect_failure config "$(run config --set output.dir=\""$work/config"\")" "$work/config/config.toml"
# The trace is written to trace.json.partial, then renamed into place (never left in part).
full_at "$work/trace/trace.json.partial"
expect_failure trace "$(run trace --set output.dir=\""$work/trace"\" --set output.trace=true)" \
  "$work/trace/trace.json"
[ -e "$work/trace/trace.json" ] || [ -L "$work/trace/trace.json.partial" ] &&
  fail "trace: a failed trace write left trace.json or trace.json.partial"
echo "ok: metrics, config and trace writes that fail are exit 1 naming the file"

# A checkpoint that cannot be written: exit 1, no temporary file, `latest` as it was.
ckpt=$work/ckpt
rc=$(run good --set output.dir=\""$work/good"\" --set checkpoint.dir=\""$ckpt"\" --set checkpoint.every=3)
[ "$rc" -eq 0 ] || { cat "$work/good.log"; fail "good: exit code $rc"; }
[ "$(cat "$ckpt/latest")" = "step_00000006.safetensors" ] || fail "good: latest is not step 6"
full_at "$ckpt/step_00000009.safetensors.tmp"
rc=$(run checkpoint --set output.dir=\""$work/good"\" --set checkpoint.dir=\""$ckpt"\" \
  --set checkpoint.every=3 --set checkpoint.resume=true --set train.steps=12)
expect_failure checkpoint "$rc" "step_00000009.safetensors"
ls "$ckpt" | grep -q '\.tmp$' && { ls -l "$ckpt"; fail "checkpoint: a temporary file was left"; }
[ -e "$ckpt/step_00000009.safetensors" ] && fail "checkpoint: a failed checkpoint looks complete"
[ "$(cat "$ckpt/latest")" = "step_00000006.safetensors" ] || fail "checkpoint: latest was touched"
# The pointer itself: a failed write of latest.tmp leaves the old pointer and no temporary file.
full_at "$ckpt/latest.tmp"
rc=$(run pointer --set output.dir=\""$work/good"\" --set checkpoint.dir=\""$ckpt"\" \
  --set checkpoint.every=3 --set checkpoint.resume=true --set train.steps=9)
expect_failure pointer "$rc" "$ckpt/latest.tmp"
[ -e "$ckpt/latest.tmp" ] && fail "pointer: latest.tmp was left"
[ "$(cat "$ckpt/latest")" = "step_00000006.safetensors" ] || fail "pointer: latest was touched"
echo "ok: a checkpoint or pointer that cannot be written is exit 1; no temp file; latest kept"

# A checkpoint file that cannot even be created for want of space (a full inode table or quota:
# ENOSPC or EDQUOT at open) is exit 1 as well, so a supervisor restarts it; it was exit 2 (bad
# input) with advice to check checkpoint.dir. A preloaded open() that fails so for
# *.safetensors.tmp stands in for the filesystem (left out under ASan, whose runtime must be the
# first library loaded).
if command -v cc >/dev/null && ! ldd "$zerolap" | grep -q libasan; then
  cat >"$work/no_inodes.c" <<'C'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <string.h>
static int refused(const char* path, int flags) {
  const char* suffix = ".safetensors.tmp";
  const size_t n = strlen(path), m = strlen(suffix);
  return (flags & O_CREAT) && n >= m && strcmp(path + n - m, suffix) == 0;
}
#define SHIM(name)                                                              \
  int name(const char* path, int flags, ...) {                                  \
    va_list args;                                                               \
    va_start(args, flags);                                                      \
    const mode_t mode = va_arg(args, mode_t);                                   \
    va_end(args);                                                               \
    if (refused(path, flags)) { errno = ENOSPC; return -1; }                    \
    int (*real)(const char*, int, ...) = (int (*)(const char*, int, ...))dlsym(RTLD_NEXT, #name); \
    return real(path, flags, mode);                                             \
  }
SHIM(open)
SHIM(open64)
C
  cc -shared -fPIC -o "$work/no_inodes.so" "$work/no_inodes.c" -ldl || fail "cannot build no_inodes.so"
  rc=$(flags="$flags -x LD_PRELOAD=$work/no_inodes.so" run no_inodes \
    --set output.dir=\""$work/no_inodes"\" --set checkpoint.dir=\""$work/no_inodes/ck"\" \
    --set checkpoint.every=3)
  expect_failure no_inodes "$rc" "$work/no_inodes/ck/step_00000003.safetensors.tmp"
  echo "ok: a checkpoint file that cannot be created for want of space is exit 1"
fi

# The bench's results (written to bench.json.partial, then renamed into place).
full_at "$work/bench/bench.json.partial"
rc=$(timeout 120 mpirun $flags -np 2 "$zerolap" bench "$work/run.toml" --set output.dir=\""$work/bench"\" --set output.overwrite=true \
  --set bench.steps=1 --set bench.warmup=0 --set 'bench.modes=["ddp"]' >"$work/bench.log" 2>&1; echo $?)
expect_failure bench "$rc" "$work/bench/bench.json"
echo "ok: bench results that cannot be written are exit 1"

# Out of inodes on a real tmpfs, where this test may mount: whichever output cannot be created
# (run.json, config.toml, metrics.csv, the trace: one more inode each time) is exit 1 naming it,
# as a full disk is. metrics.csv was exit 2 ("check output.dir"), as if the directory were bad
# input, though it had passed the start-up check.
inodes=$work/inodes
mkdir -p "$inodes"
for n in 2 3 4 5; do
  if ! mount -t tmpfs -o size=1m,nr_inodes=$n tmpfs "$inodes" 2>/dev/null; then
    echo "note: cannot mount a tmpfs here"
    break
  fi
  rc=$(run inodes_$n --set output.dir=\""$inodes"\" --set output.trace=true)
  umount "$inodes"
  expect_failure inodes_$n "$rc" "'$inodes/"
  [ "$n" -ne 4 ] || grep -qF "$inodes/metrics.csv" "$work/inodes_$n.log" ||
    { cat "$work/inodes_$n.log"; fail "inodes_$n: metrics.csv is not named"; }
done
[ "$n" -eq 5 ] && echo "ok: an output that cannot be created for want of inodes is exit 1"

# A checkpoint.dir whose path leaves no room under PATH_MAX for the names a run writes in it is
# exit 2 naming the key, before any training. It passed the start-up check (whose file has a
# short name) and failed at the first checkpoint: exit 2 for a single file, exit 1 for a shard or
# the sharded format's start-up check, as if the disk had failed.
deep() {  # LENGTH: a directory path of LENGTH characters under $work
  local path=$work/deep
  while [ $((${#path} + 201)) -lt "$1" ]; do path=$path/$(printf 'd%.0s' {1..200}); done
  printf '%s/%s' "$path" "$(printf 'e%.0s' $(seq $(($1 - ${#path} - 1))))"
}
for format in single_file sharded; do
  # 4070: room for step_00000002.safetensors.tmp (4100 > 4095: not); 4060: for the shard check
  # file, not for step_00000002/shard_00000_of_00002.g0.safetensors.
  length=$([ $format = single_file ] && echo 4070 || echo 4060)
  long=$(deep $length)
  rc=$(run long_$format --set output.dir=\""$work/long_out"\" --set checkpoint.dir=\""$long"\" \
    --set checkpoint.every=2 --set checkpoint.format=\"$format\")
  [ "$rc" -eq 2 ] || { cut -c1-300 "$work/long_$format.log"; fail "long_$format: exit code $rc, expected 2"; }
  grep -qF "checkpoint.dir = '$long' is too long a path" "$work/long_$format.log" ||
    { cut -c1-300 "$work/long_$format.log"; fail "long_$format: checkpoint.dir is not named"; }
  grep -q '^step ' "$work/long_$format.log" && fail "long_$format: it trained before it failed"
done
rm -rf "$work/deep"
echo "ok: a checkpoint.dir too long for the names written in it is exit 2 before any training"

# A read-only filesystem as each output location: exit 2 naming the key, before any work. Before,
# output.dir there was exit 1 at the first write (checkpoint.dir 2: one cause, two codes), and a
# bench measured everything before it failed.
ro=$work/ro
mkdir -p "$ro"
if mount -t tmpfs -o ro,size=8k tmpfs "$ro" 2>/dev/null; then
  expect_refused() {  # NAME RC KEY
    [ "$2" -eq 2 ] || { cat "$work/$1.log"; fail "$1: exit code $2, expected 2"; }
    grep -qF "$3 = '$ro'" "$work/$1.log" || { cat "$work/$1.log"; fail "$1: $3 is not named"; }
    grep -q "not writable" "$work/$1.log" || { cat "$work/$1.log"; fail "$1: no reason"; }
  }
  expect_refused ro_output "$(run ro_output --set output.dir=\""$ro"\")" output.dir
  expect_refused ro_checkpoint "$(run ro_checkpoint --set output.dir=\""$work/ro_out"\" \
    --set checkpoint.dir=\""$ro"\")" checkpoint.dir
  rc=$(timeout 120 mpirun $flags -np 2 "$zerolap" bench "$work/run.toml" --set output.dir=\""$ro"\" \
    --set bench.steps=1 --set bench.warmup=0 --set 'bench.modes=["ddp"]' >"$work/ro_bench.log" 2>&1; echo $?)
  expect_refused ro_bench "$rc" output.dir
  grep -q "measuring" "$work/ro_bench.log" && { cat "$work/ro_bench.log"; fail "ro_bench: it measured first"; }
  umount "$ro"
  echo "ok: a read-only output.dir or checkpoint.dir is exit 2 naming the key, before any work"
else
  echo "note: cannot mount a read-only tmpfs here"
fi

# A real full filesystem, where this test may mount one.
fs=$work/tmpfs
mkdir -p "$fs"
# 16 KiB: run.json and config.toml take a 4 KiB page each, so metrics.csv fills up mid-run (at 8 KiB
# it got no byte at all, and an empty file tests no row).
if mount -t tmpfs -o size=16k tmpfs "$fs" 2>/dev/null; then
  trap 'umount "$fs"' EXIT
  rc=$(run tmpfs --set output.dir=\""$fs"\" --set train.steps=400)
  expect_failure tmpfs "$rc" "$fs/metrics.csv"
  # Whole rows only: it ended with a cut row ("1123,2,") before.
  [ "$(tail -c 1 "$fs/metrics.csv" | od -An -c | tr -d ' ')" = '\n' ] ||
    { tail -c 200 "$fs/metrics.csv"; fail "tmpfs: metrics.csv ends mid-row"; }
  awk -F, 'NF != 10 { bad = 1 } END { exit bad }' "$fs/metrics.csv" ||
    { tail -c 200 "$fs/metrics.csv"; fail "tmpfs: metrics.csv has a row of another width"; }
  echo "ok: output.dir on a full tmpfs is exit 1 naming metrics.csv, which ends with a whole row"
else
  echo "note: cannot mount a tmpfs here; the /dev/full cases above stand for a full disk"
fi
echo "PASS"
