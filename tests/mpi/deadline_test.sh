#!/usr/bin/env bash
# No wait without a deadline: one rank of a 2-rank job stops (SIGSTOP, through the
# ZEROLAP_FAULT_STOP test hook of base/fault_stop.h) before MPI_Init, at start-up, inside a checkpoint write,
# before evaluation's reduction, or before the trace is gathered at the end of a traced run, and
# (SIGSTOP from outside) in the middle of ZeRO stage 3 training. The other rank must give up after runtime.timeout_s = 5 s with
# exit 1 and a message naming its rank and the operation, and the whole job must end within
# timeout_s + 10 s of the stop. Before, start-up and checkpoints waited forever.
# Usage: deadline_test.sh ZEROLAP_BINARY WORK_DIR
source "$(dirname "${BASH_SOURCE[0]}")/cli_test_prologue.sh" "$@"
timeout_s=5
limit_s=$((timeout_s + 10))

cat >"$work/run.toml" <<TOML
[model]
kind = "mlp"
widths = [2, 32, 32, 3]
[data]
kind = "spirals"
train_samples = 960
test_samples = 300
batch_size = 16
[parallel]
mode = "zero"
bucket_cap_mb = 0.004
first_bucket_cap_mb = 0.001
[train]
steps = 40
log_every = 10
eval_every = 20
[checkpoint]
dir = "$work/ckpt"
every = 20
[runtime]
timeout_s = $timeout_s
[output]
dir = "$work/out"
TOML

# await_end JOB LOG MESSAGE: waits up to limit_s for mpirun JOB to end; else prints LOG, kills the
# job (its stopped ranks too) and fails with MESSAGE.
await_end() {
  local job=$1 log=$2 message=$3
  for _ in $(seq 1 $((limit_s * 10))); do
    kill -0 "$job" 2>/dev/null || return 0
    sleep 0.1
  done
  cat "$log"
  pkill -9 -P "$job"; kill -9 "$job"
  fail "$message"
}

# stop_at POINT OPERATION [ARGS...]: rank 1 stops at POINT; rank 0 must time out in OPERATION.
stop_at() {
  local point=$1 operation=$2 log="$work/$1.log"
  shift 2
  rm -rf "$work/ckpt" "$work/out"
  ZEROLAP_FAULT_STOP="$point:1" mpirun $flags -np 2 -x ZEROLAP_FAULT_STOP "$zerolap" train \
    "$work/run.toml" "$@" >"$log" 2>&1 &
  local job=$!
  for _ in $(seq 1 600); do  # the stop: set-up may take a while on a loaded machine
    grep -q "rank 1 stops itself" "$log" && break
    kill -0 "$job" 2>/dev/null || break
    sleep 0.1
  done
  grep -q "rank 1 stops itself" "$log" || { cat "$log"; kill -9 "$job"; fail "$point: rank 1 never stopped"; }
  local start
  start=$(date +%s%N)
  await_end "$job" "$log" "$point: the job still runs ${limit_s} s after rank 1 stopped"
  wait "$job"
  local rc=$?
  local elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
  [ "$rc" -eq 1 ] || { cat "$log"; fail "$point: exit code $rc, expected 1"; }
  grep -qE "rank 0: $operation.* did not complete within runtime.timeout_s = $timeout_s s" "$log" ||
    { cat "$log"; fail "$point: no timeout message naming rank 0 and '$operation'"; }
  echo "ok: $point: the job ended ${elapsed_ms} ms after rank 1 stopped, exit 1"
}

# Inside MPI_Init (before the watchdog, 6 of 12 stops within 0.15 s of launch hung the job).
stop_at mpi_init "MPI_Init_thread"
stop_at startup "the start-up check for bad input"
stop_at checkpoint "receiving checkpoint data from rank 1"
stop_at evaluation "all_reduce_f64"
stop_at trace "the trace's clock exchange with rank 1" --set output.trace=true

# Mid-training at ZeRO stage 3 (gathers in forward and backward, reduce-scatters, the step's
# verdict): rank 1 is stopped (SIGSTOP) while both train; whatever rank 0 waits for then ends it.
rm -rf "$work/out"
mpirun $flags -np 2 "$zerolap" train "$work/run.toml" --set checkpoint.dir=\"\" \
  --set parallel.collective=\"reduce_scatter_allgather\" --set parallel.zero_stage=3 \
  --set parallel.overlap=\"interleaved\" --set train.steps=100000000 --set train.epochs=0 \
  --set train.eval_every=0 --set train.log_every=1000000 >"$work/stage3.log" 2>&1 &
job=$!
ranks=""
for _ in $(seq 1 600); do  # both ranks training: rank 0 wrote the metrics header
  ranks=$(pgrep -P "$job" -f "$zerolap" | tr '\n' ' ')
  [ -s "$work/out/metrics.csv" ] && [ "$(echo $ranks | wc -w)" -eq 2 ] && break
  sleep 0.1
done
victim=$(echo "$ranks" | awk '{print $NF}')
[ -n "$victim" ] || { cat "$work/stage3.log"; kill -9 "$job"; fail "stage 3: no rank processes"; }
sleep 1
kill -STOP "$victim"
await_end "$job" "$work/stage3.log" "stage 3: the job still runs ${limit_s} s after a rank stopped"
wait "$job"
rc=$?
kill -9 "$victim" 2>/dev/null
[ "$rc" -ne 0 ] || { cat "$work/stage3.log"; fail "stage 3: exit 0 after a rank stopped"; }
grep -qE "rank 0: .* did not complete within runtime.timeout_s = $timeout_s s" "$work/stage3.log" ||
  { cat "$work/stage3.log"; fail "stage 3: no timeout message naming rank 0"; }
echo "ok: stage 3: a rank stopped mid-training ends the job ($(grep -oE "rank 0: [^(]*" "$work/stage3.log" | head -1))"
echo "PASS"
