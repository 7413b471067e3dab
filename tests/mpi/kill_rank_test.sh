#!/usr/bin/env bash
# Kills one rank of a running 2-rank training job with SIGKILL: the whole job must end within 10 s
# (no rank left waiting in a collective), and mpirun exits 137, Open MPI's 128 + 9.
# Usage: kill_rank_test.sh ZEROLAP_BINARY CONFIG WORK_DIR
set -u
zerolap=$1
config=$2
work=$3
rm -rf "$work"  # a metrics file left by an earlier run would end the wait below at once
mkdir -p "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun -np 2 --oversubscribe "$zerolap" train "$config" --set train.steps=100000000 \
  --set train.epochs=0 --set train.log_every=1000000 --set "output.dir=\"$work\"" \
  >"$work/job.log" 2>&1 &
job=$!

# Wait until both ranks are training (the metrics file exists once rank 0 finished set-up).
ranks=""
for _ in $(seq 1 300); do
  ranks=$(pgrep -P "$job" -f "$zerolap" | tr '\n' ' ')
  [ -s "$work/metrics.csv" ] && [ "$(echo $ranks | wc -w)" -eq 2 ] && break
  sleep 0.1
done
victim=$(echo "$ranks" | awk '{print $NF}')
if [ -z "$victim" ]; then
  echo "FAIL: no rank processes found under mpirun (pid $job)"; cat "$work/job.log"; kill -9 "$job"; exit 1
fi
sleep 1
echo "ranks: $ranks; killing $victim with SIGKILL"
start=$(date +%s%N)
kill -9 "$victim"
for _ in $(seq 1 100); do
  kill -0 "$job" 2>/dev/null || break
  sleep 0.1
done
if kill -0 "$job" 2>/dev/null; then
  echo "FAIL: the job is still running 10 s after a rank was killed"
  pkill -9 -P "$job"; kill -9 "$job"; exit 1
fi
wait "$job"
rc=$?
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
echo "job ended ${elapsed_ms} ms after the kill with exit code $rc"
# Open MPI's code for a rank killed by signal N is 128 + N (README's exit-code table says so).
if [ "$rc" -ne 137 ]; then echo "FAIL: exit code $rc after a rank was killed, expected 137"; exit 1; fi
echo "PASS"
