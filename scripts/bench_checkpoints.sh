#!/usr/bin/env bash
# The cost of checkpoints to training, old (single file) and new (sharded, sync and async) side by
# side (docs/checkpoints.md, "What a checkpoint costs"):
#  1. configs/bench_large.toml (84M parameters, AdamW) on 4 ranks, stage 1 with element shards:
#     the seconds training stops per checkpoint, from each checkpoint's progress line (the batch
#     is cut to 4 per rank: a checkpoint's size does not depend on it);
#  2. 200 steps of configs/bench_overlap.toml on 2 ranks: steps per second (metrics.csv's
#     elapsed_s at step 200) without checkpoints, with checkpoint.every = 10 async sharded, and
#     with checkpoint.every = 10 sync single-file; and each checkpoint's own stop from its
#     progress line (async: the staging copy; the commit runs in the background).
# Prints medians with p10-p90 over every checkpoint (1) and every repetition (2); in (2) the runs
# alternate round by round, and each run with checkpoints is also given as a ratio to the run
# without them in its round.
# Usage: scripts/bench_checkpoints.sh ZEROLAP_BINARY WORK_DIR [REPEATS (default 3)]
set -u
zerolap=$1
work=$2
repeats=${3:-3}
mkdir -p "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
flags="--oversubscribe --bind-to none"
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

stats() {  # LABEL UNIT VALUES...: median and p10-p90 (nearest rank)
  python3 - "$@" <<'PY'
import sys
label, unit, xs = sys.argv[1], sys.argv[2], sorted(float(x) for x in sys.argv[3:])
if not xs:
    print(f"{label}: no samples"); sys.exit()
q = lambda p: xs[min(len(xs) - 1, max(0, round(p * (len(xs) - 1))))]
print(f"{label}: median {q(0.5):.3f} {unit} (p10 {q(0.1):.3f}, p90 {q(0.9):.3f}; n = {len(xs)})")
PY
}

formats=("single_file false" "sharded false" "sharded true")
echo "== configs/bench_large.toml, 4 ranks, stage 1: seconds training stops per checkpoint"
for f in "${formats[@]}"; do
  set -- $f
  name="$1_async_$2"
  rm -rf "$work/large_$name"
  mpirun $flags -np 4 "$zerolap" train "$root/configs/bench_large.toml" \
    --set runtime.device=cpu --set data.batch_size=4 --set train.steps=12 --set train.log_every=12 \
    --set parallel.mode=zero --set parallel.collective=reduce_scatter_allgather \
    --set checkpoint.every=3 --set checkpoint.keep=1 --set "checkpoint.format=$1" \
    --set "checkpoint.async=$2" --set "checkpoint.dir=\"$work/large_$name/ckpt\"" \
    --set "output.dir=\"$work/large_$name/out\"" >"$work/large_$name.log" 2>&1 ||
    { tail -5 "$work/large_$name.log"; echo "FAILED: $name"; continue; }
  if [ "$1" = single_file ]; then
    values=$(sed -n 's/.*checkpoint step .* MB, \([0-9.]*\) s)$/\1/p' "$work/large_$name.log")
  else
    values=$(sed -n 's/.*training stopped \([0-9.]*\) s)$/\1/p' "$work/large_$name.log")
  fi
  stats "$name" s $values
  if [ "$2" = true ]; then  # the commit (manifest, latest, pruning): rank 0, in the background
    values=$(sed -n 's/.*committed in \([0-9.]*\) s;.*/\1/p' "$work/large_$name.log")
    stats "$name (its commit, in the background)" s $values
  fi
done

echo "== 200 steps of configs/bench_overlap.toml, 2 ranks: steps per second"
# The three runs alternate, one round at a time: a slow spell of the machine then falls on every
# kind of run, and each round's ratio to the run without checkpoints compares neighbours.
runs=("none" "sharded true" "single_file false")
declare -A rates ratios
for i in $(seq 1 "$repeats"); do
  base=""
  for r in "${runs[@]}"; do
    set -- $r
    out="$work/overlap_$1_$i"
    rm -rf "$out"
    ckpt=()
    [ "$1" != none ] && ckpt=(--set checkpoint.every=10 --set checkpoint.keep=2
      --set "checkpoint.format=$1" --set "checkpoint.async=$2" --set "checkpoint.dir=\"$out/ckpt\"")
    mpirun $flags -np 2 "$zerolap" train "$root/configs/bench_overlap.toml" --set runtime.device=cpu \
      --set train.steps=200 --set train.log_every=200 "${ckpt[@]}" --set "output.dir=\"$out\"" \
      >"$out.log" 2>&1 || { tail -5 "$out.log"; echo "FAILED: $r"; continue; }
    elapsed=$(awk -F, '$1 == 200 && $3 != "" { print $NF }' "$out/metrics.csv")
    rate=$(python3 -c "print(200 / $elapsed)")
    rates[$1]="${rates[$1]:-} $rate"
    if [ "$1" = none ]; then
      base=$rate
    elif [ -n "$base" ]; then
      ratios[$1]="${ratios[$1]:-} $(python3 -c "print($rate / $base)")"
    fi
  done
done
for r in "${runs[@]}"; do
  set -- $r
  stats "${1}${2:+ async=$2}" steps/s ${rates[$1]:-}
  [ "$1" = none ] && continue
  stats "  ${1} against none in the same round" x ${ratios[$1]:-}
  if [ "$1" = single_file ]; then
    values=$(sed -n 's/.*checkpoint step .* MB, \([0-9.]*\) s)$/\1/p' "$work"/overlap_"$1"_*.log)
  else
    values=$(sed -n 's/.*training stopped \([0-9.]*\) s)$/\1/p' "$work"/overlap_"$1"_*.log)
  fi
  stats "  ${1} per checkpoint: training stops" s $values
done
