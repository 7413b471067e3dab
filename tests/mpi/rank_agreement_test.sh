#!/usr/bin/env bash
# Ranks started with different configs or data (MPMD command lines joined with ':') must all exit
# 2 at start-up with a message naming what differs and the ranks on each side. Before the start-up
# agreement these runs corrupted the heap (train.steps), crashed (model.widths), trained apart
# with exit 0 (optimizer.lr) or aborted mid-run (node-local IDX files of different sizes).
# Usage: rank_agreement_test.sh ZEROLAP_BINARY WORK_DIR
source "$(dirname "${BASH_SOURCE[0]}")/cli_test_prologue.sh" "$@"

cat >"$work/run.toml" <<TOML
[model]
kind = "mlp"
widths = [4, 16, 3]
[data]
kind = "idx"
train_images = "$work/a/train-images"
train_labels = "$work/a/train-labels"
test_images = "$work/a/test-images"
test_labels = "$work/a/test-labels"
batch_size = 8
eval_batch_size = 16
[optimizer]
kind = "adam"
lr = 0.01
[train]
steps = 30
log_every = 10
eval_every = 10
[runtime]
timeout_s = 30
[output]
dir = "$work/out"
TOML

# Two node-local copies of an IDX set of 2x2 images: a/ and same/ hold the same 60 training
# samples, b/ holds 50.
make_idx() {  # DIR TRAIN_SAMPLES
  python3 - "$1" "$2" <<'PY'
import os, struct, sys
d, n = sys.argv[1], int(sys.argv[2])
os.makedirs(d, exist_ok=True)
def write(name, count, labels):
    with open(os.path.join(d, name), "wb") as f:
        if labels:
            f.write(struct.pack(">II", 0x801, count) + bytes(i % 3 for i in range(count)))
        else:
            f.write(struct.pack(">IIII", 0x803, count, 2, 2) +
                    bytes((i * 37 + j * 11) % 256 for i in range(count) for j in range(4)))
write("train-images", n, False); write("train-labels", n, True)
write("test-images", 30, False); write("test-labels", 30, True)
PY
}
make_idx "$work/a" 60
make_idx "$work/same" 60
make_idx "$work/b" 50

# run NAME "ARGS OF RANK 0" "ARGS OF RANK 1": the job's exit code and log.
run() {
  local name=$1 a=$2 b=$3
  timeout 120 mpirun $flags -np 1 "$zerolap" train "$work/run.toml" $a \
    : -np 1 "$zerolap" train "$work/run.toml" $b >"$work/$name.log" 2>&1
  echo $?
}
expect_mismatch() {  # NAME "ARGS0" "ARGS1" PATTERN...
  local name=$1 a=$2 b=$3
  shift 3
  local rc
  rc=$(run "$name" "$a" "$b")
  [ "$rc" -eq 2 ] || { cat "$work/$name.log"; fail "$name: exit code $rc, expected 2"; }
  for pattern in "$@"; do
    grep -qF -- "$pattern" "$work/$name.log" || { cat "$work/$name.log"; fail "$name: no '$pattern'"; }
  done
  if grep -q "^step " "$work/$name.log"; then cat "$work/$name.log"; fail "$name: it trained"; fi
  echo "ok: $name exits 2 naming it"
}

expect_mismatch steps "--set train.steps=30" "--set train.steps=40" \
  "train.steps: 30 on rank 0; 40 on rank 1"
expect_mismatch widths "" "--set model.widths=[4,32,3]" \
  "model.widths: [4, 16, 3] on rank 0; [4, 32, 3] on rank 1"
expect_mismatch lr "" "--set optimizer.lr=0.02" "optimizer.lr: 0.01 on rank 0; 0.02 on rank 1"
# runtime.device decides the device's set-up (the GPU exchange is a collective "cpu" never
# enters): agreed before it, so this is the per-key error on every build, not a timeout.
expect_mismatch device "--set runtime.device=cpu" "--set runtime.device=cuda" \
  'runtime.device: "cpu" on rank 0; "cuda" on rank 1'

expect_mismatch idx "" \
  "--set data.train_images=\"$work/b/train-images\" --set data.train_labels=\"$work/b/train-labels\"" \
  "training inputs: 60 samples x 4 features" "on rank 0 (data.train_images = \"$work/a/train-images\")" \
  "50 samples x 4 features" "on rank 1 (data.train_images = \"$work/b/train-images\")" \
  "training labels: 60 labels"

# A file only one rank cannot read (a node-local copy missing on rank 1's node) is named with that
# rank: the message gave no rank before.
rc=$(run missing_on_1 "" "--set data.train_images=\"$work/nothere\"")
[ "$rc" -eq 2 ] || { cat "$work/missing_on_1.log"; fail "missing_on_1: exit code $rc, expected 2"; }
grep -q "^zerolap: error on rank 1 of 2: .*$work/nothere" "$work/missing_on_1.log" ||
  { cat "$work/missing_on_1.log"; fail "missing_on_1: the message does not name rank 1"; }
echo "ok: a file missing on rank 1 only is named with its rank"

# Keys that decide which collectives a rank issues, though not what a run computes: a checkpoint
# at other steps, on one rank only, or a trace gathered by one rank only (this crashed inside
# Open MPI before they were agreed on).
expect_mismatch checkpoint_every "--set checkpoint.dir=\"$work/ckpt\" --set checkpoint.every=2" \
  "--set checkpoint.dir=\"$work/ckpt\" --set checkpoint.every=3" \
  "checkpoint.every: 2 on rank 0; 3 on rank 1"
expect_mismatch checkpoint_dir "--set checkpoint.dir=\"$work/ckpt2\"" "" \
  "checkpoint.dir: set on rank 0" "unset on rank 1"
expect_mismatch trace "--set output.trace=true" "" "output.trace: true on rank 0; false on rank 1"
# The format and async decide the checkpoint's own collectives: ranks that differed there waited
# out runtime.timeout_s at the first checkpoint and exited 1 with none written.
expect_mismatch checkpoint_format "--set checkpoint.dir=\"$work/ckpt3\" --set checkpoint.format=\"sharded\"" \
  "--set checkpoint.dir=\"$work/ckpt3\"" 'checkpoint.format: "sharded" on rank 0; "single_file" on rank 1'
expect_mismatch checkpoint_async \
  "--set checkpoint.dir=\"$work/ckpt4\" --set checkpoint.format=\"sharded\" --set checkpoint.async=true" \
  "--set checkpoint.dir=\"$work/ckpt4\" --set checkpoint.format=\"sharded\"" \
  "checkpoint.async: true on rank 0; false on rank 1"
# The bench sizes its collectives from the config before any trainer starts: it agrees first.
bench() {
  local name=$1 a=$2 b=$3
  timeout 120 mpirun $flags -np 1 "$zerolap" bench "$work/run.toml" --set bench.steps=1 \
    --set bench.warmup=0 --set 'bench.modes=["ddp"]' $a \
    : -np 1 "$zerolap" bench "$work/run.toml" --set bench.steps=1 --set bench.warmup=0 \
    --set 'bench.modes=["ddp"]' $b >"$work/$name.log" 2>&1
  echo $?
}
# Reported once, as train does, with no MPI_ABORT banner (every rank printed it before, then
# Open MPI's banner followed).
expect_bench_mismatch() {  # NAME A B MESSAGE
  local rc
  rc=$(bench "$1" "$2" "$3")
  [ "$rc" -eq 2 ] || { cat "$work/$1.log"; fail "$1: exit code $rc, expected 2"; }
  [ "$(grep -cF -- "$4" "$work/$1.log")" -eq 1 ] ||
    { cat "$work/$1.log"; fail "$1: the per-key message is not there exactly once"; }
  grep -q "MPI_ABORT" "$work/$1.log" && { cat "$work/$1.log"; fail "$1: the job was aborted"; }
  true
}
expect_bench_mismatch bench_widths "" "--set model.widths=[4,64,3]" \
  "model.widths: [4, 16, 3] on rank 0; [4, 64, 3] on rank 1"
expect_bench_mismatch bench_rounds "" "--set bench.rounds=2" "bench.rounds: 1 on rank 0; 2 on rank 1"
echo "ok: bench with different widths or rounds exits 2 naming them, once"

# The control: other paths to the same data on one rank (node-local copies) is no mismatch.
rc=$(run same "" \
  "--set data.train_images=\"$work/same/train-images\" --set data.train_labels=\"$work/same/train-labels\"")
[ "$rc" -eq 0 ] || { cat "$work/same.log"; fail "same data at other paths: exit code $rc"; }
grep -q "^final step 30" "$work/same.log" || { cat "$work/same.log"; fail "same data: no final step"; }
echo "ok: the same data at other paths trains"
echo "PASS"
