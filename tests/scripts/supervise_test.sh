#!/usr/bin/env bash
# scripts/supervise.sh: no restart after exit 0, 2, 130 or 143; up to --max-restarts after a
# failure, one line each, a log of every attempt, --set checkpoint.resume=true on restarts (a
# fine-tune's once a checkpoint exists; the keys read as TOML allows them, dotted ones included), a
# restart that waits for the last attempt's directory lock, an attempt's whole output in its log
# before the exit line, the command changed by --hook and SUPERVISE_ATTEMPT; a SIGTERM to it (or to
# its process group, the attempt's last output logged, its own code kept) stops it, during an
# attempt or at once during the backoff or the hook (SIGKILL to a hook that ignores SIGTERM),
# reaching an attempt's process group once and waiting for what a wrapper script started; resume
# words in every context of an MPMD line, none without a checkpoint.dir; the hook's last line, exit
# 2 for one that is not shell words; logs appended to by a rerun; and a 4-rank run whose rank 2 is
# killed with SIGKILL at a random step, twice, ends with the parameters and optimizer state of an
# uninterrupted run, bitwise, and metrics.csv has each step once.
# Usage: supervise_test.sh ZEROLAP_BINARY SOURCE_DIR WORK_DIR
source "$(dirname "${BASH_SOURCE[0]}")/../mpi/cli_test_prologue.sh" "$1" "$3"
supervise="$2/scripts/supervise.sh"

# Exit codes that are never restarted: one attempt, no restart line.
for code in 0 2 126 127 130 143; do
  "$supervise" --max-restarts 3 --backoff 0 --log-dir "$work/c$code" -- bash -c "exit $code" \
    2>"$work/c$code.err"
  rc=$?
  [ "$rc" -eq "$code" ] || fail "exit $code came back as $rc"
  [ "$(ls "$work/c$code/supervise" | wc -l)" -eq 1 ] || fail "exit $code was restarted"
  ! grep -q restart "$work/c$code.err" || fail "exit $code printed a restart line"
done

# An attempt's log holds all its output before the supervisor's "exited" line, also output a child
# writes after the command itself exits (the ranks of an mpirun that exits first).
"$supervise" --max-restarts 0 --backoff 0 --log-dir "$work/late" -- \
  bash -c 'x=late; (sleep 1; echo "$x output"; echo "$x error" >&2) & exit 1' 2>/dev/null
grep -n . "$work/late/supervise/attempt_1.log" | tr '\n' ' ' >"$work/late.lines"
grep -q "late output.*late error.*exited 1\|late error.*late output.*exited 1" "$work/late.lines" ||
  { cat "$work/late/supervise/attempt_1.log"; fail "an attempt's log misses output, or has it after the exit line"; }

# A failure: N restarts, a line and a log each, then the last code, checkpoint.resume=true appended
# to each restart; but a run begun from a given checkpoint (checkpoint.resume = "FILE", a
# fine-tune) runs as given until checkpoint.dir has a `latest` (here written by attempt 2): before,
# it restarted from step 0 with fresh parameters and exited 0. The keys are read from a config file
# written as TOML allows (no spaces around '=', single quotes, a comment after the section).
printf '[checkpoint] # where\ndir=%s\nresume = "base.safetensors"  # a fine-tune\n' "'$work/c1ck'" >"$work/c1.toml"
"$supervise" --max-restarts 2 --backoff 0 --log-dir "$work/c1" -- \
  bash -c 'echo "attempt $SUPERVISE_ATTEMPT after $SUPERVISE_LAST_EXIT: $*"
    [ "$SUPERVISE_ATTEMPT" = 2 ] && mkdir -p "$0" && echo step_00000007.safetensors >"$0/latest"
    exit 1' "$work/c1ck" train "$work/c1.toml" 2>"$work/c1.err"
rc=$?
[ "$rc" -eq 1 ] || fail "repeated failures ended with $rc, not 1"
[ "$(grep -c '^supervise: restart' "$work/c1.err")" -eq 2 ] || { cat "$work/c1.err"; fail "not one line per restart"; }
grep -q "^supervise: restart 1 of 2: attempt 2 after exit 1, no checkpoint in '$work/c1ck' yet: from checkpoint.resume = \"base.safetensors\" again" "$work/c1.err" ||
  { cat "$work/c1.err"; fail "the first restart line does not say the attempt, the code and the checkpoint it begins from"; }
grep -q "^supervise: restart 2 of 2: attempt 3 after exit 1, resuming from step 7 ($work/c1ck/step_00000007.safetensors)" "$work/c1.err" ||
  { cat "$work/c1.err"; fail "the second restart line does not say the step it resumes from"; }
grep -q "no restarts left" "$work/c1.err" || fail "no word on the exhausted restarts"
for k in 1 2 3; do [ -s "$work/c1/supervise/attempt_$k.log" ] || fail "no log of attempt $k"; done
[ ! -e "$work/c1/supervise/attempt_4.log" ] || fail "more than 1 + 2 attempts"
grep -q "attempt 1 after 0: train $work/c1.toml$" "$work/c1/supervise/attempt_1.log" ||
  fail "attempt 1's environment or arguments"
grep -q "attempt 2 after 1: train $work/c1.toml$" "$work/c1/supervise/attempt_2.log" ||
  { cat "$work/c1/supervise/attempt_2.log"; fail "a fine-tune's restart before any checkpoint resumes"; }
grep -q "attempt 3 after 1: train $work/c1.toml --set checkpoint.resume=true$" "$work/c1/supervise/attempt_3.log" ||
  { cat "$work/c1/supervise/attempt_3.log"; fail "a restart after a checkpoint does not resume"; }
# Any other run resumes on every restart, a checkpoint or not (the restart rule of one run's
# directories then starts it at step 0, on any world size).
"$supervise" --max-restarts 1 --backoff 0 --log-dir "$work/c1b" -- \
  bash -c 'echo "attempt $SUPERVISE_ATTEMPT: $*"; exit 1' sh --set "checkpoint.dir=\"$work/c1bck\"" \
  2>"$work/c1b.err"
grep -q "^supervise: restart 1 of 1: attempt 2 after exit 1, resuming from none yet (no checkpoint in '$work/c1bck'): step 0" "$work/c1b.err" ||
  { cat "$work/c1b.err"; fail "a restart before any checkpoint does not say it starts at step 0"; }
grep -q "attempt 2: --set checkpoint.dir=\"$work/c1bck\" --set checkpoint.resume=true$" "$work/c1b/supervise/attempt_2.log" ||
  { cat "$work/c1b/supervise/attempt_2.log"; fail "a restart before any checkpoint does not resume"; }

# The same keys as top-level dotted keys (`checkpoint.dir = ...`, valid TOML), with spaces and
# quotes around the names, output.dir among them: the restart begins from the given checkpoint
# again (not step 0 with fresh parameters), and the logs go to that output.dir.
printf '%s\n' "checkpoint . dir = '$work/c1dck'" "\"checkpoint\".resume = \"base.safetensors\"" \
  "output.dir = \"$work/c1d\"  # where" '[train]' 'steps = 3' >"$work/c1d.toml"
"$supervise" --max-restarts 1 --backoff 0 -- \
  bash -c 'echo "attempt $SUPERVISE_ATTEMPT: $*"; exit 1' sh train "$work/c1d.toml" 2>"$work/c1d.err"
grep -q "^supervise: restart 1 of 1: attempt 2 after exit 1, no checkpoint in '$work/c1dck' yet: from checkpoint.resume = \"base.safetensors\" again" "$work/c1d.err" ||
  { cat "$work/c1d.err"; fail "dotted keys: a fine-tune's restart does not begin from its checkpoint"; }
grep -q "attempt 2: train $work/c1d.toml$" "$work/c1d/supervise/attempt_2.log" ||
  fail "dotted keys: the attempt logs are not in output.dir, or a fine-tune's restart resumes"

# The same with zerolap itself (it prints the effective config: `zerolap config`): a fine-tune
# from a 2-rank run's step 6, configured with dotted keys, crashes at step 9 before its first
# `latest`; the restart begins from step 6 again and finishes.
cat >"$work/ft.toml" <<EOF
checkpoint.resume = "$work/ftbase/ck/step_00000006.safetensors"
checkpoint.dir = "$work/ft/ck"
checkpoint.every = 3
output.dir = "$work/ft"
[model]
widths = [2, 8, 3]
[data]
kind = "spirals"
train_samples = 64
test_samples = 16
batch_size = 8
[train]
steps = 12
log_every = 3
eval_every = 0
EOF
mpirun -np 2 $flags "$zerolap" train "$work/ft.toml" --set checkpoint.resume=false \
  --set "output.dir=\"$work/ftbase\"" --set "checkpoint.dir=\"$work/ftbase/ck\"" \
  --set train.steps=6 >"$work/ftbase.log" 2>&1 || { cat "$work/ftbase.log"; fail "the base run"; }
(cd "$work" && "$supervise" --max-restarts 1 --backoff 0 -- bash -c \
  '[ "$SUPERVISE_ATTEMPT" = 1 ] && export ZEROLAP_FAULT_CHECKPOINT=after_write:9; exec "$@"' \
  sh mpirun -np 2 $flags "$zerolap" train "$work/ft.toml" >"$work/ft.out" 2>&1)
rc=$?
[ "$rc" -eq 0 ] || { cat "$work/ft.out"; fail "the supervised fine-tune ended with $rc"; }
grep -q "no checkpoint in '$work/ft/ck' yet: from checkpoint.resume = \"$work/ftbase/ck/step_00000006.safetensors\" again" "$work/ft.out" ||
  { cat "$work/ft.out"; fail "the fine-tune's restart line"; }
grep -q "resumed from $work/ftbase/ck/step_00000006.safetensors at step 6" \
  "$work/ft/supervise/attempt_2.log" 2>/dev/null ||
  { cat "$work/ft.out"; fail "the fine-tune's restart did not begin from its checkpoint"; }
[ ! -e "$work/runs" ] || fail "the fine-tune's attempt logs went to runs/default"

# A restart waits while the last attempt's directory is still locked (its ranks outliving the
# launcher, as after a second signal to mpirun), instead of starting into it: zerolap would refuse
# the locked directory with exit 2, and the supervisor would stop there for good.
mkdir -p "$work/locked"
"$supervise" --max-restarts 1 --backoff 0 --log-dir "$work/lk" -- bash -c '
  lock="$0/.zerolap.lock"
  if [ "$SUPERVISE_ATTEMPT" = 1 ]; then
    flock "$lock" sleep 2 >/dev/null 2>&1 &
    while flock -n "$lock" true; do sleep 0.02; done
    exit 1
  fi
  flock -n "$lock" true || exit 2' "$work/locked" --set "output.dir=$work/locked" 2>"$work/lk.err"
rc=$?
[ "$rc" -eq 0 ] || { cat "$work/lk.err"; fail "a restart into a locked directory: exit $rc"; }
grep -q "^supervise: '$work/locked' is in use by a running zerolap .*waiting up to 300 s" \
  "$work/lk.err" || { cat "$work/lk.err"; fail "no word on the wait for the lock"; }

# --hook replaces the command of a restart (here: one that succeeds).
printf '#!/bin/sh\necho "bash -c \\"exit 0\\""\n' >"$work/hook.sh" && chmod +x "$work/hook.sh"
"$supervise" --max-restarts 5 --backoff 0 --log-dir "$work/hooked" --hook "$work/hook.sh" -- \
  bash -c 'exit 1' 2>"$work/hooked.err"
rc=$?
[ "$rc" -eq 0 ] || { cat "$work/hooked.err"; fail "the hook's command did not run: exit $rc"; }
[ "$(ls "$work/hooked/supervise" | wc -l)" -eq 2 ] || fail "the hooked run took other than 2 attempts"

# A signal to the supervisor goes to the attempt and stops the supervisor, even where the attempt
# then exits 1 (as mpirun does after a SIGINT or SIGTERM of its own).
for body in 'exec sleep 30' 'sleep 30 & trap "kill $!; exit 1" TERM; wait'; do
  "$supervise" --max-restarts 3 --backoff 0 --log-dir "$work/signalled" -- bash -c "$body" \
    2>"$work/signalled.err" &
  supervisor=$!
  for _ in $(seq 1 100); do [ -e "$work/signalled/supervise/attempt_1.log" ] && break; sleep 0.05; done
  sleep 0.5
  kill -TERM "$supervisor"
  wait "$supervisor"
  rc=$?
  [ "$rc" -eq 143 ] || { cat "$work/signalled.err"; fail "a SIGTERM to the supervisor ($body) ended it with $rc"; }
  [ ! -e "$work/signalled/supervise/attempt_2.log" ] || fail "a SIGTERM to the supervisor ($body) restarted"
  rm -rf "$work/signalled"
done

# An attempt that exits 0 at once on the SIGTERM the supervisor passes on: its 0 comes back (a
# signal's interrupted `wait` returned 143 for it when the attempt had just ended).
for run in 1 2 3; do
  "$supervise" --max-restarts 3 --backoff 0 --log-dir "$work/quick$run" -- \
    bash -c 'trap "exit 0" TERM; echo started; sleep 30 & wait' >/dev/null 2>&1 &
  supervisor=$!
  # The line "started" alone: the log's header line names the command, "echo started" included.
  for _ in $(seq 1 200); do grep -qsx started "$work/quick$run/supervise/attempt_1.log" && break; sleep 0.05; done
  kill -TERM "$supervisor"
  wait "$supervisor"
  rc=$?
  [ "$rc" -eq 0 ] || { tail -n 1 "$work/quick$run/supervise/attempt_1.log"; fail "an attempt that exited 0 on SIGTERM came back as $rc"; }
done

# A signal between attempts, during the backoff or while the hook runs, stops the supervisor at
# once: no next attempt, the signal's code, and a message that names no attempt as running.
printf '#!/bin/sh\ntouch "$0.started"\nsleep 5\necho "bash -c \\"exit 0\\""\n' \
  >"$work/slow_hook.sh" && chmod +x "$work/slow_hook.sh"
for between in backoff hook; do
  # ready: the supervisor is in the backoff (attempt 1's log ends with its exit line) or the hook.
  if [ "$between" = backoff ]; then
    options=(--backoff 5)
    ready() { grep -qs 'attempt 1 exited 1' "$work/between/supervise/attempt_1.log"; }
  else
    options=(--backoff 0 --hook "$work/slow_hook.sh")
    ready() { [ -e "$work/slow_hook.sh.started" ]; }
  fi
  "$supervise" --max-restarts 3 "${options[@]}" --log-dir "$work/between" -- bash -c 'exit 1' \
    2>"$work/between.err" &
  supervisor=$!
  for _ in $(seq 1 100); do ready && break; sleep 0.05; done
  sleep 0.3
  kill -TERM "$supervisor"
  for _ in $(seq 1 40); do kill -0 "$supervisor" 2>/dev/null || break; sleep 0.05; done
  if kill -0 "$supervisor" 2>/dev/null; then
    kill -KILL "$supervisor"
    wait "$supervisor"
    fail "a SIGTERM to the supervisor during the $between left it running for 2 s"
  fi
  wait "$supervisor"
  rc=$?
  [ "$rc" -eq 143 ] || { cat "$work/between.err"; fail "a SIGTERM during the $between gave $rc"; }
  [ ! -e "$work/between/supervise/attempt_2.log" ] ||
    fail "a SIGTERM to the supervisor during the $between started attempt 2"
  ! grep -q 'during attempt 2' "$work/between.err" ||
    { cat "$work/between.err"; fail "the message after the $between names attempt 2 as running"; }
  grep -q '^supervise: stopped by a signal .*before attempt 2' "$work/between.err" ||
    { cat "$work/between.err"; fail "no word that the $between was stopped before attempt 2"; }
  rm -rf "$work/between"
done

# A hook that ignores SIGTERM does not hold the supervisor: 10 s after the signal it gets SIGKILL,
# and the supervisor stops with 143 and says so.
printf '#!/bin/sh\ntrap "" TERM\necho $$ >"$0.pid"\nsleep 60\n' >"$work/stubborn_hook.sh" &&
  chmod +x "$work/stubborn_hook.sh"
"$supervise" --max-restarts 1 --backoff 0 --log-dir "$work/stubborn" --hook "$work/stubborn_hook.sh" \
  -- bash -c 'exit 1' 2>"$work/stubborn.err" &
supervisor=$!
for _ in $(seq 1 100); do [ -s "$work/stubborn_hook.sh.pid" ] && break; sleep 0.05; done
kill -TERM "$supervisor"
for _ in $(seq 1 300); do kill -0 "$supervisor" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$supervisor" 2>/dev/null; then
  kill -KILL "$supervisor" "$(cat "$work/stubborn_hook.sh.pid")"
  fail "a hook that ignores SIGTERM held the supervisor for 30 s"
fi
wait "$supervisor"
rc=$?
[ "$rc" -eq 143 ] && grep -q "the hook .* still runs 10 s after SIGTERM: sending SIGKILL" \
  "$work/stubborn.err" || { cat "$work/stubborn.err"; fail "a stubborn hook: exit $rc, no SIGKILL line"; }
! kill -0 "$(cat "$work/stubborn_hook.sh.pid")" 2>/dev/null || fail "the stubborn hook still runs"
[ ! -e "$work/stubborn/supervise/attempt_2.log" ] || fail "attempt 2 started after a stubborn hook"

# A SIGTERM to the supervisor's whole process group (a scheduler stopping the job) reaches the
# attempt, which still writes as it shuts down: that output is in the log, and the attempt's own
# code (143) comes back, not a failure to write its output.
# stop_group NAME SCRIPT: runs a supervisor in a session of its own over `bash -c SCRIPT` (which
# prints "started"), sends SIGTERM to its whole process group then, and sets rc to its exit code.
stop_group() {
  setsid "$supervise" --max-restarts 3 --backoff 0 --log-dir "$work/$1" -- bash -c "$2" \
    2>"$work/$1.err" &
  supervisor=$!
  for _ in $(seq 1 200); do grep -qsx started "$work/$1/supervise/attempt_1.log" && break; sleep 0.05; done
  kill -TERM -- "-$supervisor"
  wait "$supervisor"
  rc=$?
}
stop_group group 'x=stopping; trap "sleep 0.5; echo \$x now; exit 143" TERM; echo started; sleep 30 & wait'
[ "$rc" -eq 143 ] || { cat "$work/group.err"; fail "a SIGTERM to the supervisor's process group gave $rc, not 143"; }
grep -q "stopping now" "$work/group/supervise/attempt_1.log" ||
  { cat "$work/group/supervise/attempt_1.log"; fail "the output of an attempt stopped with its process group is not in its log"; }

# One SIGTERM to the whole group reaches the attempt once (mpirun exits at once, without the
# interrupted step's checkpoint, on a second); and a wrapper script that dies at it while a process
# it started still writes: the supervisor waits for that process, its output is in the log before
# the exit line, and nothing of the attempt runs on after the supervisor.
stop_group group2 '(trap "sleep 1; echo child saved; exit 143" TERM; echo started; sleep 30 & wait) & wait'
log="$work/group2/supervise/attempt_1.log"
[ "$rc" -eq 143 ] || { cat "$work/group2.err"; fail "a wrapper stopped with its process group gave $rc, not 143"; }
[ "$(grep -cx "child saved" "$log")" -eq 1 ] ||
  { cat "$log"; fail "the attempt's child got the group's SIGTERM other than once, or was not waited for"; }
[ "$(tail -n 1 "$log")" = "supervise: attempt 1 exited 143" ] || { cat "$log"; fail "the exit line is not last"; }
! pgrep -f "echo child saved" >/dev/null || fail "the attempt's child runs on after the supervisor exited"

# An MPMD line (`mpirun -np 1 zerolap train A : -np 1 zerolap train B`) resumes every app context,
# not only the last one's ranks; a run with no checkpoint.dir restarts from step 0 without the
# resume key (zerolap refuses checkpoint.resume = true without one).
"$supervise" --max-restarts 1 --backoff 0 --log-dir "$work/mpmd" -- bash -c 'echo "args: $*"; exit 1' \
  sh /none/zerolap train a.toml --set "checkpoint.dir=\"$work/m\"" : /none/zerolap train a.toml \
  --set "checkpoint.dir=\"$work/m\"" 2>/dev/null
resumed="--set checkpoint.dir=\"$work/m\" --set checkpoint.resume=true"
grep -qxF "args: /none/zerolap train a.toml $resumed : /none/zerolap train a.toml $resumed" \
  "$work/mpmd/supervise/attempt_2.log" || { cat "$work/mpmd/supervise/attempt_2.log"; fail "an MPMD restart does not resume every context"; }
"$supervise" --max-restarts 1 --backoff 0 --log-dir "$work/nock" -- bash -c 'echo "args: $*"; exit 1' \
  sh train "$work/none.toml" 2>"$work/nock.err"
grep -q "^supervise: restart 1 of 1: attempt 2 after exit 1, no checkpoint.dir: from step 0$" "$work/nock.err" &&
  grep -qxF "args: train $work/none.toml" "$work/nock/supervise/attempt_2.log" ||
  { cat "$work/nock.err" "$work/nock/supervise/attempt_2.log"; fail "a run without checkpoint.dir restarts with the resume key"; }

# The hook's last non-blank line is the command; one that is not shell words stops the supervisor
# with exit 2, saying so, before the next attempt.
printf '#!/bin/sh\necho "ignored first line"\necho "bash -c \\"exit 0\\""\necho\n' >"$work/hook2.sh"
printf '#!/bin/sh\necho "bash -c \\"exit 0"\n' >"$work/hook_bad.sh"
chmod +x "$work/hook2.sh" "$work/hook_bad.sh"
"$supervise" --max-restarts 1 --backoff 0 --log-dir "$work/hook2" --hook "$work/hook2.sh" -- \
  bash -c 'exit 1' 2>"$work/hook2.err" || { cat "$work/hook2.err"; fail "the hook's last line was not the command"; }
"$supervise" --max-restarts 1 --backoff 0 --log-dir "$work/hook_bad" --hook "$work/hook_bad.sh" -- \
  bash -c 'exit 1' 2>"$work/hook_bad.err"
rc=$?
[ "$rc" -eq 2 ] && grep -q "printed a line that is not a command .*stopping before attempt 2" "$work/hook_bad.err" &&
  [ ! -e "$work/hook_bad/supervise/attempt_2.log" ] ||
  { cat "$work/hook_bad.err"; fail "a hook line that is not shell words gave $rc, not 2 with a message"; }

# A rerun with the same log directory (a requeued job) appends to the attempt logs; the exit line
# is a line of its own after output that ends without a newline.
for run in 1 2; do
  "$supervise" --max-restarts 0 --backoff 0 --log-dir "$work/rerun" -- bash -c 'printf "run %s" "$0"' "$run" 2>/dev/null
done
log="$work/rerun/supervise/attempt_1.log"
[ "$(grep -c '^supervise: attempt 1 (.*supervisor pid [0-9]*): bash' "$log")" -eq 2 ] &&
  [ "$(grep -cx 'supervise: attempt 1 exited 0' "$log")" -eq 2 ] && grep -qx "run 1" "$log" && grep -qx "run 2" "$log" ||
  { cat "$log"; fail "a rerun's log does not follow the last one's, or an exit line is glued to the output"; }

# The real thing: 4 ranks, rank 2 killed with SIGKILL at a random step, twice. Both kills come in
# the first ~110 steps of 600, so on a loaded machine an attempt still has hundreds of steps (a few
# seconds) to run when kill_rank2 sees the step, and rank 2 is still there to kill.
steps=600
cat >"$work/run.toml" <<EOF
[model]
kind = "mlp"
widths = [2, 16, 16, 3]
[data]
kind = "spirals"
train_samples = 640
test_samples = 64
noise = 0.1
batch_size = 8
[optimizer]
kind = "adam"
lr = 0.01
[parallel]
mode = "zero"
bucket_cap_mb = 0.001
first_bucket_cap_mb = 0.0005
[train]
steps = ${steps}
log_every = 1
eval_every = 0
[checkpoint]
every = 10
keep = 2
EOF
job() {  # job NAME: the training command into $work/NAME
  echo mpirun -np 4 $flags "$zerolap" train "$work/run.toml" --set "output.dir=\"$work/$1\"" \
    --set "checkpoint.dir=\"$work/$1/ck\""
}
$(job ref) >"$work/ref.log" 2>&1 || { tail -n 20 "$work/ref.log"; fail "the uninterrupted run"; }

# Waits until attempt ATTEMPT has logged step STEP, then kills its rank 2 with SIGKILL. The step is
# read from that attempt's own log: metrics.csv still ends with the killed attempt's steps until the
# next one resumes, so it would say "reached" before the next attempt's ranks even exist.
kill_rank2() {
  local attempt=$1 step=$2 log="$work/sup/supervise/attempt_$1.log" s pid
  for _ in $(seq 1 3000); do
    s=$(grep -o '^step *[0-9]*' "$log" 2>/dev/null | tail -n 1 | tr -dc 0-9)
    if [ -n "$s" ] && [ "$s" -ge "$step" ]; then
      for pid in $(pgrep -f -- "output.dir=.$work/sup"); do
        if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=2; then
          kill -9 "$pid" && echo "attempt $attempt: killed rank 2 (pid $pid) after step $s"
          return 0
        fi
      done
    fi
    sleep 0.02
  done
  echo "attempt $attempt: rank 2 not found at step $step or later (last step logged: ${s:-none})"
  return 1
}
first=$((15 + RANDOM % 40))
second=$((first + 15 + RANDOM % 40))
# shellcheck disable=SC2046
"$supervise" --max-restarts 3 --backoff 1 -- $(job sup) >"$work/sup.log" 2>&1 &
supervisor=$!
kill_rank2 1 "$first" || { kill "$supervisor"; cat "$work/sup.log"; fail "first kill"; }
kill_rank2 2 "$second" || { kill "$supervisor"; cat "$work/sup.log"; fail "second kill"; }
wait "$supervisor"
rc=$?
[ "$rc" -eq 0 ] || { tail -n 30 "$work/sup.log"; fail "the supervised run ended with $rc"; }
grep "^supervise: restart" "$work/sup.log"
[ "$(grep -c '^supervise: restart' "$work/sup.log")" -eq 2 ] || fail "not 2 restarts"
[ -s "$work/sup/supervise/attempt_3.log" ] && [ ! -e "$work/sup/supervise/attempt_4.log" ] ||
  fail "the attempt logs are not 3"

# Bitwise: every tensor's CRC32 (parameters and optimizer state) of the last checkpoints.
crcs() { "$zerolap" inspect "$1" | awk '$2 == "F32" { print $1, $NF }'; }
crcs "$work/ref/ck/$(printf 'step_%08d' "$steps").safetensors" >"$work/ref.crc" || fail "inspect the reference"
crcs "$work/sup/ck/$(printf 'step_%08d' "$steps").safetensors" >"$work/sup.crc" || fail "inspect the supervised run's"
[ -s "$work/ref.crc" ] && cmp -s "$work/ref.crc" "$work/sup.crc" ||
  { diff "$work/ref.crc" "$work/sup.crc" | head; fail "the supervised run's tensors differ from the uninterrupted run's"; }
logged=$(awk -F, 'NR > 1 && $3 != "" { print $1 }' "$work/sup/metrics.csv")
[ "$logged" = "$(seq 1 "$steps")" ] || fail "metrics.csv does not have each of steps 1..$steps once"
echo "PASS"
