#!/usr/bin/env bash
# Ctrl-C and SIGTERM on a 2-rank training job (docs/reliability.md, "Ctrl-C and SIGTERM"): every
# rank finishes its step, all stop at the same step, the checkpoint of that step is written and
# loads (inspect, and a resume that starts at that step), rank 0 prints the promised line, and
# the job exits 128 + signal; with output.trace, its trace (of output.trace_steps steps) is written
# whole, and a signal while it is written lets it finish. Delivered to every rank (as Slurm's
# scancel does): mpirun exits 130 / 143. Delivered to mpirun alone (a terminal's Ctrl-C: Open MPI
# gives each rank a process group of its own): Open MPI 4 sends SIGTERM to the ranks, which stop
# the same way, and mpirun itself exits 1, its own choice.
# Usage: interrupt_test.sh ZEROLAP_BINARY CONFIG WORK_DIR
source "$(dirname "${BASH_SOURCE[0]}")/cli_test_prologue.sh" "$1" "$3"
config=$2

# end_of JOB SECONDS LOG WHAT EXPECTED_RC: waits up to SECONDS for the job to end (killed and
# failed after that), then fails unless it exited EXPECTED_RC.
end_of() {
  local job=$1 seconds=$2 log=$3 what=$4 expected=$5
  for _ in $(seq 1 $((seconds * 10))); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$job" 2>/dev/null; then
    pkill -9 -P "$job"; kill -9 "$job"; cat "$log"; fail "$what: still running $seconds s later"
  fi
  wait "$job"
  local rc=$?
  [ "$rc" -eq "$expected" ] || { cat "$log"; fail "$what: exit code $rc, expected $expected"; }
}

# wait_for_stop JOB LOG WHAT: waits until one of JOB's ranks has stopped itself at its fault point
# (ZEROLAP_FAULT_STOP); sets `ranks` (every rank's pid) and `stopped` (that rank's), or fails.
wait_for_stop() {
  local job=$1 log=$2 what=$3
  ranks="" stopped=""
  for _ in $(seq 1 600); do
    ranks=$(pgrep -P "$job" -f "$zerolap" | tr '\n' ' ')
    for r in $ranks; do [[ $(ps -o stat= -p "$r") == T* ]] && stopped=$r; done
    [ -n "$stopped" ] && break
    sleep 0.1
  done
  [ -n "$stopped" ] || { cat "$log"; kill -9 "$job"; fail "$what: no rank stopped at its fault point"; }
}

# interrupt NAME SIGNAL TARGET(ranks|mpirun) EXPECTED_RC [FORMAT(single_file|async_sharded)]
# async_sharded: async sharded checkpoints every 20 steps, so one may be in flight at the signal;
# the interrupt's checkpoint is committed (manifest, then `latest`) before the job exits.
interrupt() {
  local name=$1 signal=$2 target=$3 expected=$4 format=${5:-single_file} dir="$work/$1"
  local keys=()
  if [ "$format" = async_sharded ]; then
    keys=(--set 'checkpoint.format="sharded"' --set checkpoint.async=true --set checkpoint.every=20)
  elif [ "$format" = traced ]; then
    keys=(--set output.trace=true --set output.trace_steps=50)
  fi
  mkdir -p "$dir"
  mpirun -np 2 $flags "$zerolap" train "$config" --set train.steps=100000000 --set train.epochs=0 \
    --set train.log_every=1000000 --set train.eval_every=0 --set "output.dir=\"$dir/out\"" \
    --set "checkpoint.dir=\"$dir/ck\"" "${keys[@]}" >"$dir/job.log" 2>&1 &
  local job=$! ranks=""
  for _ in $(seq 1 300); do  # until both ranks train (metrics.csv: rank 0 finished set-up)
    ranks=$(pgrep -P "$job" -f "$zerolap" | tr '\n' ' ')
    [ -s "$dir/out/metrics.csv" ] && [ "$(echo $ranks | wc -w)" -eq 2 ] && break
    sleep 0.1
  done
  [ "$(echo $ranks | wc -w)" -eq 2 ] || { cat "$dir/job.log"; kill -9 "$job"; fail "$name: ranks not found"; }
  sleep 1
  if [ "$target" = ranks ]; then kill "-$signal" $ranks; else kill "-$signal" "$job"; fi
  end_of "$job" 30 "$dir/job.log" "$name after SIG$signal" "$expected"
  local line step file
  line=$(grep -E "interrupted at step [0-9]+; checkpoint .*; resume with --set checkpoint.resume=true" "$dir/job.log")
  [ -n "$line" ] || { cat "$dir/job.log"; fail "$name: no 'interrupted at step N; checkpoint ...' line"; }
  step=$(sed -E 's/.*interrupted at step ([0-9]+);.*/\1/' <<<"$line")
  # Where the launcher decides the code (1 after a signal to mpirun), the step and the resume
  # command are the job's last line (Open MPI's libevent may add a "[warn] Epoll" line).
  if [ "$target" = mpirun ]; then
    local last
    last=$(grep -v '^\[warn\]' "$dir/job.log" | tail -1)
    grep -qE "interrupted at step $step; checkpoint .*; resume with --set checkpoint.resume=true" <<<"$last" ||
      { cat "$dir/job.log"; fail "$name: the last line is not the interrupted line: $last"; }
  fi
  local pointer
  if [ "$format" = async_sharded ]; then
    pointer=$(printf 'step_%08d/manifest.json' "$step")
  else
    pointer=$(printf 'step_%08d.safetensors' "$step")
  fi
  file=$dir/ck/$pointer
  [ -f "$file" ] || { ls "$dir/ck"; fail "$name: no checkpoint of the interrupted step $step"; }
  [ "$(cat "$dir/ck/latest")" = "$pointer" ] || fail "$name: latest is not step $step"
  "$zerolap" inspect "$file" >"$dir/inspect.log" 2>&1 || { cat "$dir/inspect.log"; fail "$name: inspect failed"; }
  if [ "$format" = traced ]; then  # the interrupted run's trace: whole, of its first 50 steps
    local traced
    traced=$(python3 -c 'import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
print(len({e["args"]["step"] for e in events if e.get("name") == "forward" and e["pid"] == 0}))' \
      "$dir/out/trace.json") || fail "$name: trace.json is not whole JSON"
    [ "$traced" -eq 50 ] || fail "$name: trace.json holds $traced steps, expected output.trace_steps = 50"
  fi
  mpirun -np 2 $flags "$zerolap" train "$config" --set train.steps=$((step + 2)) --set train.epochs=0 \
    --set train.log_every=1 --set train.eval_every=0 --set "output.dir=\"$dir/out\"" \
    --set "checkpoint.dir=\"$dir/ck\"" --set checkpoint.resume=true "${keys[@]}" >"$dir/resume.log" 2>&1 ||
    { cat "$dir/resume.log"; fail "$name: the resume failed"; }
  grep -q "resumed from .* at step $step " "$dir/resume.log" &&
    grep -q "^final step $((step + 2)) " "$dir/resume.log" ||
    { cat "$dir/resume.log"; fail "$name: the resume did not continue from step $step"; }
  echo "ok: $name: stopped at step $step, exit $expected"
}

# A signal while the trace is written (rank 1 stopped on its way there, rank 0 waiting for it):
# the trace is finished, whole, and the run, trained to its end, exits 0.
signal_while_tracing() {
  local dir="$work/while_tracing"
  mkdir -p "$dir"
  ZEROLAP_FAULT_STOP=trace:1 mpirun -np 2 $flags "$zerolap" train "$config" --set train.steps=30 \
    --set output.trace=true --set "output.dir=\"$dir/out\"" >"$dir/job.log" 2>&1 &
  local job=$!
  wait_for_stop "$job" "$dir/job.log" "while_tracing"
  kill -TERM $ranks
  sleep 0.5
  kill -CONT "$stopped"
  end_of "$job" 30 "$dir/job.log" "while_tracing after SIGTERM" 0
  grep -q "SIGTERM: writing trace.json first (again to end now)" "$dir/job.log" ||
    { cat "$dir/job.log"; fail "while_tracing: no line saying the trace is written first"; }
  python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$dir/out/trace.json" ||
    fail "while_tracing: trace.json is not whole JSON"
  echo "ok: a SIGTERM while the trace was written let it finish, exit 0"
}

# signal_after_training NAME POINT ARGS...: a signal while rank 1 is stopped at fault point POINT
# at the end of the training (rank 0 waiting for it): the run has trained to its end, so it
# finishes (exit 0), and rank 0 says so. final_eval: during the final evaluation (the signal went
# unanswered before); last_checkpoint: during the last step's synchronous checkpoint, which the
# step's agreement can no longer take up (it answers at the next step), so the note comes after.
signal_after_training() {
  local name=$1 point=$2
  shift 2
  local dir="$work/$name"
  mkdir -p "$dir"
  ZEROLAP_FAULT_STOP=$point:1 mpirun -np 2 $flags "$zerolap" train "$config" \
    --set train.steps=20 --set train.eval_every=0 --set "output.dir=\"$dir/out\"" "$@" \
    >"$dir/job.log" 2>&1 &
  local job=$!
  wait_for_stop "$job" "$dir/job.log" "$name"
  kill -INT $ranks
  sleep 0.5
  kill -CONT "$stopped"
  end_of "$job" 60 "$dir/job.log" "$name after SIGINT" 0
  grep -q "^zerolap: SIGINT: the run trained to its end: finishing its final checkpoint and evaluation" \
    "$dir/job.log" || { cat "$dir/job.log"; fail "$name: no line saying the signal was seen"; }
  grep -q "^final step 20 " "$dir/job.log" || { cat "$dir/job.log"; fail "$name: no final line"; }
  echo "ok: $name: a SIGINT after the training let it finish, said so, exit 0"
}

# The bench: SIGINT to both ranks after its first run; it stops after the run in progress, prints
# the table of the runs it finished and exits 130, without bench.json / bench.csv.
bench_interrupt() {
  local dir="$work/bench"
  mkdir -p "$dir"
  # Three modes at one cap: runs long enough to be interrupted, short enough to end on a loaded
  # machine.
  local runs=3
  mpirun -np 2 $flags "$zerolap" bench "$config" --set bench.steps=5000 --set bench.warmup=5 \
    --set 'bench.modes=["ddp","zero/none/allreduce_broadcast","zero/after_backward/reduce_broadcast"]' \
    --set 'bench.bucket_cap_mb=[25.0]' --set "output.dir=\"$dir/out\"" >"$dir/job.log" 2>&1 &
  local job=$! ranks=""
  for _ in $(seq 1 600); do grep -q "^\[1/$runs\]" "$dir/job.log" && break; sleep 0.1; done
  ranks=$(pgrep -P "$job" -f "$zerolap" | tr '\n' ' ')
  [ "$(echo $ranks | wc -w)" -eq 2 ] || { cat "$dir/job.log"; kill -9 "$job"; fail "bench: ranks not found"; }
  kill -INT $ranks
  end_of "$job" 90 "$dir/job.log" "bench after SIGINT" 130
  local done
  done=$(sed -nE "s/.*bench interrupted after ([0-9]+) of $runs runs.*/\\1/p" "$dir/job.log")
  [ -n "$done" ] && [ "$done" -ge 1 ] && [ "$done" -lt "$runs" ] ||
    { cat "$dir/job.log"; fail "bench: no 'bench interrupted after N of $runs runs' line with 1 <= N < $runs"; }
  grep -q '^ddp ' "$dir/job.log" || { cat "$dir/job.log"; fail "bench: the finished rows were not printed"; }
  # Said at once, by rank 0 alone (the run in progress may take a while): nothing was said before.
  [ "$(grep -c "^zerolap: SIGINT: the bench stops after the run in progress" "$dir/job.log")" -eq 1 ] ||
    { cat "$dir/job.log"; fail "bench: not one line saying the SIGINT was seen"; }
  [ ! -e "$dir/out/bench.json" ] || fail "bench: an interrupted bench wrote bench.json"
  echo "ok: bench: stopped after $done of $runs runs, exit 130"
}

# A signal once the bench is measured, as rank 0 ends its results (rank 0 stopped after writing
# them, before the ranks' last barrier; rank 1 done): the job exits 0 with them. Rank 1 had left
# the bench's handlers for MPI_Finalize, where the signal's default action killed it: exit 130
# with bench.json whole.
bench_signal_at_results() {
  local dir="$work/bench_writing"
  mkdir -p "$dir"
  ZEROLAP_FAULT_STOP=bench_outputs:0 mpirun -np 2 $flags "$zerolap" bench "$config" \
    --set bench.steps=3 --set bench.warmup=1 --set 'bench.modes=["ddp"]' \
    --set 'bench.bucket_cap_mb=[25.0]' --set "output.dir=\"$dir/out\"" >"$dir/job.log" 2>&1 &
  local job=$!
  wait_for_stop "$job" "$dir/job.log" "bench_writing"
  sleep 0.5  # rank 1 on its way out
  kill -INT $ranks
  sleep 0.5
  kill -CONT "$stopped"
  end_of "$job" 60 "$dir/job.log" "bench_writing after SIGINT" 0
  python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$dir/out/bench.json" ||
    fail "bench_writing: bench.json is not whole JSON"
  echo "ok: a SIGINT while the bench wrote its results let it finish, exit 0"
}

# A second SIGINT ends a healthy process at once, while the first one's stop is still pending:
# one process (no mpirun) whose bench run in progress takes seconds (100000 steps); the second SIGINT, 0.5 s
# after the first, ends it within 2 s with 130, the "interrupted again" line and no results.
second_signal() {
  local dir="$work/second"
  mkdir -p "$dir"
  "$zerolap" bench "$config" --set bench.steps=100000 --set bench.warmup=5 \
    --set 'bench.modes=["ddp","zero/none/allreduce_broadcast"]' --set 'bench.bucket_cap_mb=[25.0]' \
    --set "output.dir=\"$dir/out\"" >"$dir/job.log" 2>&1 &
  local job=$!
  for _ in $(seq 1 600); do grep -q "^measuring limits" "$dir/job.log" && break; sleep 0.1; done
  grep -q "^measuring limits" "$dir/job.log" || { cat "$dir/job.log"; kill -9 "$job"; fail "second: the bench did not start"; }
  sleep 1  # in the limits or the first run: either way a whole run (seconds) comes before the stop
  kill -INT "$job"
  sleep 0.5
  kill -0 "$job" 2>/dev/null || { cat "$dir/job.log"; fail "second: the first SIGINT ended the bench before its run"; }
  kill -INT "$job"
  local begin=$SECONDS
  for _ in $(seq 1 100); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
  local took=$((SECONDS - begin))
  if kill -0 "$job" 2>/dev/null; then kill -9 "$job"; cat "$dir/job.log"; fail "second: still running 10 s after the second SIGINT"; fi
  wait "$job"
  local rc=$?
  [ "$rc" -eq 130 ] && [ "$took" -le 2 ] || { cat "$dir/job.log"; fail "second: exit $rc after $took s, expected 130 within 2 s"; }
  # Of a bench: no results (it said "without a checkpoint", which a bench never writes).
  grep -q "interrupted again: ending now, without bench.json or bench.csv" "$dir/job.log" ||
    { cat "$dir/job.log"; fail "second: no 'interrupted again' line naming the results"; }
  ! grep -q "bench interrupted after" "$dir/job.log" || fail "second: the bench waited for its run to end"
  [ ! -e "$dir/out/bench.json" ] || fail "second: bench.json written"
  echo "ok: second SIGINT ended the process after $took s, exit $rc"
}

# One rank stopped (SIGSTOP) while the other is interrupted: the interrupted rank waits at most
# runtime.timeout_s (exit 1 naming it; the pending agreement once held it for ever); a second
# SIGINT ends it at once.
stalled() {
  local name=$1 second=$2 dir="$work/$1"
  mkdir -p "$dir"
  mpirun -np 2 $flags "$zerolap" train "$config" --set train.steps=100000000 --set train.epochs=0 \
    --set train.log_every=1000000 --set train.eval_every=0 --set runtime.timeout_s=4 \
    --set "output.dir=\"$dir/out\"" >"$dir/job.log" 2>&1 &
  local job=$! ranks=""
  for _ in $(seq 1 300); do
    ranks=$(pgrep -P "$job" -f "$zerolap" | tr '\n' ' ')
    [ -s "$dir/out/metrics.csv" ] && [ "$(echo $ranks | wc -w)" -eq 2 ] && break
    sleep 0.1
  done
  [ "$(echo $ranks | wc -w)" -eq 2 ] || { cat "$dir/job.log"; kill -9 "$job"; fail "$name: ranks not found"; }
  local r0 r1
  read -r r0 r1 <<<"$ranks"
  sleep 0.5
  kill -STOP "$r1"
  kill -INT "$r0"
  local begin=$SECONDS
  if [ "$second" = yes ]; then sleep 0.5; kill -INT "$r0"; fi
  for _ in $(seq 1 200); do kill -0 "$r0" 2>/dev/null || break; sleep 0.1; done
  local took=$((SECONDS - begin)) alive=no
  kill -0 "$r0" 2>/dev/null && alive=yes
  kill -CONT "$r1" 2>/dev/null
  kill -9 "$r1" 2>/dev/null
  wait "$job"
  [ "$alive" = no ] || { pkill -9 -P "$job"; cat "$dir/job.log"; fail "$name: rank 0 still running 20 s later"; }
  if [ "$second" = yes ]; then
    [ "$took" -le 2 ] || { cat "$dir/job.log"; fail "$name: a second SIGINT took $took s"; }
    grep -q "interrupted again: ending now" "$dir/job.log" || { cat "$dir/job.log"; fail "$name: no 'interrupted again' line"; }
  else
    [ "$took" -le 10 ] || { cat "$dir/job.log"; fail "$name: rank 0 took $took s with runtime.timeout_s = 4"; }
    # The step's collectives or the agreement, whichever waits first, time out.
    grep -q "rank 0: .* did not complete within runtime.timeout_s" "$dir/job.log" ||
      { cat "$dir/job.log"; fail "$name: no timeout message naming rank 0"; }
  fi
  echo "ok: $name: rank 0 ended after $took s"
}

second_signal
stalled stalled_peer_timeout no
stalled stalled_peer_second_signal yes
bench_interrupt
bench_signal_at_results
interrupt sigint_ranks INT ranks 130
interrupt sigterm_ranks TERM ranks 143
interrupt sigterm_ranks_async TERM ranks 143 async_sharded
interrupt sigint_ranks_traced INT ranks 130 traced
signal_while_tracing
signal_after_training final_eval evaluation
signal_after_training last_checkpoint checkpoint --set checkpoint.every=20 \
  --set "checkpoint.dir=\"$work/last_checkpoint/ck\""
interrupt sigint_mpirun INT mpirun 1
echo "PASS"
