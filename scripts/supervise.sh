#!/usr/bin/env bash
# Restarts a failed training job from its latest checkpoint, as torchrun's --max-restarts does
# (docs/guide.md, "Long runs and restarts"; docs/reliability.md, "What a failure costs").
#
#   scripts/supervise.sh --max-restarts N [--backoff S] [--log-dir DIR] [--hook PROGRAM] -- COMMAND...
#
# Runs COMMAND (an mpirun or srun line ending in `zerolap train CONFIG [--set ...]`). When it exits
# with a failure it waits S seconds (default 10) and runs it again with
# `--set checkpoint.resume=true` appended (after each `zerolap train` of an MPMD line's app
# contexts too), up to N times; but a run begun from a given checkpoint (checkpoint.resume =
# "FILE", a fine-tune) that failed before checkpoint.dir had a checkpoint (its `latest`) runs as it
# was, from that file again, not from step 0, and so does a run without a checkpoint.dir (from
# step 0). It never restarts after exit 0
# (done), 2 (bad input: the same command fails the same way), 126 or 127 (the command cannot run
# or is not found), 130 or 143 (SIGINT / SIGTERM: the user or the scheduler stopped the job); any
# other code is a failure: 1 (a runtime failure, a rank
# that died), or what the launcher reports for a rank killed by a signal (Open MPI's mpirun: 137
# for SIGKILL).
#  - One line per restart on stderr: the attempt, the exit code, the step it resumes from.
#  - A log of every attempt, DIR/supervise/attempt_K.log (K from 1), beside the console output;
#    DIR is --log-dir, else the command's output.dir (zerolap's default runs/default). It is
#    appended to (a requeued job keeps the earlier logs): a line with the date, the supervisor's
#    pid and the command, the attempt's output, and a line that says how the attempt exited, after
#    all its output: the supervisor waits, up to 10 s, for output that processes the command
#    started still write after it exits.
#  - The command's keys (output.dir, checkpoint.dir, checkpoint.resume, runtime.timeout_s) are
#    its zerolap's: `zerolap config` prints them, --set applied, where the word before `train`
#    is a program named zerolap*; else they are read here from its last --set, else the config
#    file (`key = value` in a [section], or a dotted `section.key = value` before any).
#  - Before a restart it waits, up to runtime.timeout_s, while another process still holds the
#    lock of output.dir or checkpoint.dir (a launcher may exit before its ranks do; zerolap
#    would refuse the directory with exit 2), and says so on stderr.
#  - The command of a restart may differ (fewer ranks on the nodes that remain): it runs with
#    SUPERVISE_ATTEMPT (1, 2, ...) and SUPERVISE_LAST_EXIT in its environment, and with --hook,
#    PROGRAM runs before each restart as `PROGRAM ATTEMPT LAST_EXIT`: the last non-blank line it
#    prints replaces COMMAND for that attempt and the next (read as shell words, else exit 2;
#    resume is still appended), and a non-zero exit of PROGRAM stops the supervisor with the last
#    exit code.
#  - A SIGINT or SIGTERM to it (or to its process group) goes once to the attempt's process group
#    and stops the supervisor after that attempt (exit 130 or 143, or the attempt's 0 or 2), once
#    the processes the attempt started (a wrapper script's mpirun) have ended too, up to
#    runtime.timeout_s; during the backoff or the hook it stops it at once, 130 or 143 (a hook
#    still running 10 s after SIGTERM gets SIGKILL).
# Exit code: the last attempt's.
set -u

usage() {
  echo "usage: $0 --max-restarts N [--backoff S] [--log-dir DIR] [--hook PROGRAM] -- COMMAND..." >&2
  exit 2
}
max_restarts="" backoff=10 log_dir="" hook=""
while [ $# -gt 0 ]; do
  case $1 in
    --max-restarts) [ $# -ge 2 ] || usage; max_restarts=$2; shift 2 ;;
    --backoff) [ $# -ge 2 ] || usage; backoff=$2; shift 2 ;;
    --log-dir) [ $# -ge 2 ] || usage; log_dir=$2; shift 2 ;;
    --hook) [ $# -ge 2 ] || usage; hook=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "supervise: unknown option '$1'" >&2; usage ;;
  esac
done
[ $# -gt 0 ] || { echo "supervise: no COMMAND after --" >&2; usage; }
[[ $max_restarts =~ ^[0-9]{1,9}$ ]] || { echo "supervise: --max-restarts needs a whole number below 10^9 (got '$max_restarts')" >&2; exit 2; }
[[ $backoff =~ ^[0-9]+([.][0-9]+)?$ ]] || { echo "supervise: --backoff needs seconds (got '$backoff')" >&2; exit 2; }
command=("$@")

# The config keys of COMMAND, as its zerolap reads them: where the word before `train` is a
# program named zerolap*, `zerolap config CONFIG [--set ...]` (the words after `train`) prints the
# effective config (the reader's own rules: dotted keys, inline tables, --set, defaults). Where it
# cannot (another name, no such program here, a config that does not load: that attempt then says
# why) the keys are read here: the last --set, else the config file's `key = value` in a
# [section], or a top-level dotted `section.key = value`.
effective=""  # `zerolap config`'s output for the current command; empty: read the keys here
ask_zerolap() {
  local i
  effective=""
  for ((i = ${#command[@]} - 1; i > 0; i--)); do
    if [ "${command[i]}" = train ] && [[ ${command[i - 1]##*/} == zerolap* ]]; then
      type -P "${command[i - 1]}" >/dev/null &&
        effective=$("${command[i - 1]}" config "${command[@]:i + 1}" 2>/dev/null) || effective=""
      return
    fi
  done
}

# The value of KEY ("section.key") in the TOML text on stdin: `key = value` in a [section] (a
# comment may follow it), or `section.key = value` before any; spaces and quotes around the
# names as TOML allows them. A quoted value up to its closing quote, else up to a comment.
toml_value() {
  awk -v want="$1" -v q="'" '
    function bare(name) { gsub(/[[:space:]"]/, "", name); gsub(q, "", name); return name }
    /^[[:space:]]*\[/ {
      table = $0; sub(/#.*/, "", table); table = bare(table); gsub(/^\[+|\]+$/, "", table); next }
    {
      eq = index($0, "="); if (eq == 0) next
      key = bare(substr($0, 1, eq - 1)); if (table != "") key = table "." key
      if (key != want) next
      v = substr($0, eq + 1); sub(/^[[:space:]]*/, "", v)
      if (v ~ /^"/) { match(v, /^"([^"\\]|\\.)*"/); v = substr(v, 1, RLENGTH) }
      else if (substr(v, 1, 1) == q) { match(v, "^" q "[^" q "]*" q); v = substr(v, 1, RLENGTH) }
      else sub(/[[:space:]]*(#.*)?$/, "", v)
      print v; exit }'
}

# The value of config key SECTION.KEY for COMMAND (above), a string without its quotes.
key_of() {
  local key=$1.$2 value="" config="" previous="" arg
  if [ -n "$effective" ]; then
    value=$(toml_value "$key" <<<"$effective")
  else
    for arg in "${command[@]}"; do
      [ "$previous" = train ] && config=$arg
      [ "$previous" = --set ] && [[ $arg == "$key="* ]] && value=${arg#"$key="}
      [[ $arg == "--set=$key="* ]] && value=${arg#"--set=$key="}
      previous=$arg
    done
    if [ -z "$value" ] && [ -n "$config" ] && [ -f "$config" ] && [ -r "$config" ]; then
      value=$(toml_value "$key" <"$config")
    fi
  fi
  case $value in  # a TOML string's quotes, either kind (a basic string's \" and \\ escapes)
    \"*\") value=${value:1:${#value}-2} value=${value//\\\"/\"} value=${value//\\\\/\\} ;;
    \'*\') value=${value:1:${#value}-2} ;;
  esac
  echo "$value"
}

ask_zerolap
[ -n "$log_dir" ] || log_dir=$(key_of output dir)
[ -n "$log_dir" ] || log_dir=runs/default
mkdir -p "$log_dir/supervise" || { echo "supervise: cannot create '$log_dir/supervise'" >&2; exit 2; }

# The checkpoint a restart resumes from: the name `latest` holds in checkpoint.dir DIR; none
# (exit 1) before the run's first checkpoint.
latest_checkpoint() {
  local dir=$1 name
  # A regular file only: reading a FIFO would block (zerolap refuses one itself).
  [ -n "$dir" ] && [ -f "$dir/latest" ] && name=$(head -c 4096 "$dir/latest" 2>/dev/null) &&
    [ -n "$name" ] || return 1
  [[ $name =~ step_0*([0-9]+) ]] && echo "step ${BASH_REMATCH[1]} ($dir/$name)" || echo "$dir/$name"
}

# A signal to the supervisor (Ctrl-C, scancel) stops it. During an attempt it goes to the attempt
# and stops the supervisor after it, whatever the attempt returns (mpirun exits 1 after a SIGINT
# of its own). Between attempts it ends the backoff's sleep or the hook at once and no attempt
# follows; they get SIGTERM. Every child runs in the background so that the trap runs at once
# (bash runs it only after a foreground child ends), in a process group of its own (set -m), and
# the supervisor passes a signal on to that group once: a signal to the supervisor's whole group
# (Ctrl-C in a terminal, kill -- -PGID) must reach mpirun once, as a second one makes it exit at
# once without the interrupted step's checkpoint; and a wrapper's children get it too.
child="" child_signal="" stopped="" signal="" signals=0
forward() {
  signal=$1 stopped=$2 signals=$((signals + 1))
  [ -n "$child" ] && kill -s "${child_signal:-$signal}" -- "-$child" 2>/dev/null
}
trap 'forward INT 130' INT
trap 'forward TERM 143' TERM

# await_child SIGNAL [WHAT]: waits for the child just started in the background ($!, in a process
# group of its own) and sets $code to its exit code. A signal to the supervisor sends its group
# SIGNAL (empty: that same signal); one that came before $child was set is passed on here. WHAT
# names a child between attempts: a signal means stop now, so one still running 10 s after it
# gets SIGKILL (a hook that ignores SIGTERM would hold the supervisor); an attempt is never killed.
await_child() {
  child=$! child_signal=$1
  local what=${2:-}
  [ -n "$stopped" ] && kill -s "${child_signal:-$signal}" -- "-$child" 2>/dev/null
  local status signals_before
  while :; do
    signals_before=$signals
    wait "$child" 2>/dev/null  # not bash's "Killed" line for a child killed below
    status=$?
    if [ "$signals" -eq "$signals_before" ]; then
      code=$status
      break
    fi
    # A trapped signal ends `wait` at once with 128 + its number, also when the child has just
    # exited (an attempt that stops at once on SIGTERM with exit 0): the child's own code is what
    # a second `wait` returns; 127 (no such child) when the first one had returned it already.
    if ! kill -0 "$child" 2>/dev/null; then
      wait "$child" 2>/dev/null
      code=$?
      [ "$code" -ne 127 ] || code=$status
      break
    fi
    if [ -n "$what" ] && ! poll_while 100 kill -0 "$child" 2>/dev/null; then
      echo "supervise: $what still runs 10 s after SIG${child_signal}: sending SIGKILL" >&2
      kill -s KILL -- "-$child" 2>/dev/null
    fi
  done
  child=""
}

# stop_if_signalled [WHEN]: exits with the signal's code if one came between attempts.
stop_if_signalled() {
  [ -z "$stopped" ] && return
  echo "supervise: stopped by a signal${1:+ $1}, before attempt $attempt" \
    "(attempt $((attempt - 1)) exited $last): no restart" >&2
  exit "$stopped"
}

# timeout_s: the command's runtime.timeout_s, a TOML float (300.0, 0.5, 1e+06; flock -w and awk
# take each), or zerolap's default 300 when it is not a positive number.
timeout_s() {
  local limit
  limit=$(key_of runtime timeout_s)
  LC_ALL=C awk -v t="${limit:-x}" 'BEGIN { exit !(t ~ /^[0-9.eE+-]+$/ && t + 0 > 0) }' ||
    limit=300
  echo "$limit"
}

# wait_for_locks: before a restart, waits until no process holds the lock of output.dir or
# checkpoint.dir (a flock(2) on `.zerolap.lock` in each, held by rank 0 while it runs;
# runtime/checkpoint/directory_lock.h), at most runtime.timeout_s. A launcher may end before its
# ranks: after a second signal Open MPI's mpirun exits at once while they finish shutting down
# (they may even write one more checkpoint) within runtime.timeout_s; a restart into their
# directories before then would be refused as bad input (exit 2) and end the supervisor.
wait_for_locks() {
  command -v flock >/dev/null || return 0
  local limit dir lock holder
  limit=$(timeout_s)
  for dir in "$(key_of output dir)" "$(key_of checkpoint dir)"; do
    lock="$dir/.zerolap.lock"
    if [ -z "$dir" ] || [ ! -f "$lock" ]; then continue; fi
    flock -n -E 3 "$lock" true 2>/dev/null
    [ $? -eq 3 ] || continue  # free (or not lockable here: the attempt says so)
    holder=$(head -c 200 "$lock" 2>/dev/null | head -n 1)
    echo "supervise: '$dir' is in use by a running zerolap (${holder:-holder unknown}; a" \
      "launcher may exit before its ranks): waiting up to $limit s (runtime.timeout_s) for it" \
      "to end before attempt $attempt" >&2
    set -m
    flock -w "$limit" -E 3 "$lock" true 2>/dev/null &
    set +m
    await_child TERM "the wait for '$dir'"
    stop_if_signalled "while waiting for '$dir'"
    if [ "$code" -eq 3 ]; then
      echo "supervise: '$dir' is still in use after $limit s: attempt $attempt starts anyway" >&2
    fi
  done
}

hook_out=""
if [ -n "$hook" ]; then
  hook_out=$(mktemp) || exit 2
  trap 'rm -f "$hook_out"' EXIT
fi

# poll_while TENTHS COMMAND...: waits while COMMAND succeeds, trying it every 0.1 s, at most
# TENTHS times; a signal to the supervisor meanwhile ends the wait. Fails when the limit ended it.
poll_while() {
  local limit=$1 tenths=0 signals_before=$signals
  shift
  while "$@"; do
    [ "$signals" -eq "$signals_before" ] || return 0
    [ "$tenths" -lt "$limit" ] || return 1
    sleep 0.1
    tenths=$((tenths + 1))
  done
}

# any_alive PID...: whether one of the processes runs.
any_alive() {
  local pid
  for pid in "$@"; do kill -0 "$pid" 2>/dev/null && return 0; done
  return 1
}

# wait_for_log_writers PID...: waits, up to 10 s, for the attempt's tee processes. Each ends once
# every process that holds the attempt's stdout or stderr has ended, and an mpirun may exit before
# its ranks do; the log then has the attempt's whole output before the exit line. A signal to the
# supervisor during the wait ends it.
wait_for_log_writers() {
  poll_while 100 any_alive "$@" || echo "supervise: processes the attempt started still hold" \
    "its output open 10 s after it exited: going on (what they write still goes to its log)" >&2
}

# wait_for_group PGID: after a signal stopped the attempt, waits while a process of its process
# group still runs, up to runtime.timeout_s, before the supervisor exits: a wrapper script ends at
# the signal while the mpirun it started still writes the interrupted step's checkpoint, and a
# scheduler kills what is left of a job once its script exits. A second signal goes to the group
# too (mpirun then exits at once) and ends the wait.
wait_for_group() {
  local group=$1 limit
  [ -n "$stopped" ] && kill -0 -- "-$group" 2>/dev/null || return 0
  limit=$(timeout_s)
  echo "supervise: attempt $attempt exited $last; processes it started still run: waiting up to" \
    "$limit s (runtime.timeout_s) for them to end" >&2
  child=$group child_signal=""
  poll_while "$(LC_ALL=C awk -v t="$limit" 'BEGIN { printf "%d", t * 10 }')" \
    kill -0 -- "-$group" 2>/dev/null
  child=""
}

# attempt_command: COMMAND with the resume words after every `zerolap train` of it: before each
# `:` that ends one of an MPMD line's app contexts (every rank must resume, not the last context's
# alone), and at the end.
attempt_command() {
  local arg previous="" in_train=""
  run=()
  for arg in "${command[@]}"; do
    if [ "$arg" = : ] && [ -n "$in_train" ]; then
      run+=("${resume[@]}")
      in_train=""
    fi
    run+=("$arg")
    [ "$arg" = train ] && [[ ${previous##*/} == zerolap* ]] && in_train=1
    previous=$arg
  done
  run+=("${resume[@]}")
}

# read_hook_line: the command the hook printed (its last non-blank line) into `command`, read as
# shell words; exit 2 when it is not a list of words (an unbalanced quote, a `;`, a comment).
read_hook_line() {
  local line
  line=$(grep -v '^[[:space:]]*$' "$hook_out" | tail -n 1)
  [ -n "$line" ] || return 0
  if ! eval "new_command=($line)" 2>/dev/null || [ "${#new_command[@]}" -eq 0 ]; then
    echo "supervise: the hook '$hook' printed a line that is not a command (shell words):" \
      "'$line': stopping before attempt $attempt" >&2
    exit 2
  fi
  command=("${new_command[@]}")
  ask_zerolap
}

attempt=1 last=0 resume=() run=()
while :; do
  [ "$attempt" -eq 1 ] || stop_if_signalled
  # Appended to: a rerun of the job (a requeue) keeps the logs of the runs before it.
  log="$log_dir/supervise/attempt_$attempt.log"
  attempt_command
  echo "supervise: attempt $attempt ($(date '+%Y-%m-%d %H:%M:%S'), supervisor pid $$): ${run[*]}" \
    >>"$log"
  # The tees ignore SIGINT and SIGTERM: a signal to the whole process group (Ctrl-C, a scheduler)
  # must not cut the log while the attempt still writes as it stops; each ends when its pipe does.
  # tee -p: a console that goes away (`| head`) must not end the training with it.
  exec {to_out}> >(trap '' INT TERM; exec tee -p -a "$log")
  out_writer=$!
  exec {to_err}> >(trap '' INT TERM; exec tee -p -a "$log" >&2 {to_out}>&-)
  err_writer=$!
  set -m
  SUPERVISE_ATTEMPT=$attempt SUPERVISE_LAST_EXIT=$last "${run[@]}" \
    </dev/null >&"$to_out" 2>&"$to_err" {to_out}>&- {to_err}>&- &
  set +m
  attempt_group=$!
  await_child ""
  last=$code
  exec {to_out}>&- {to_err}>&-
  wait_for_group "$attempt_group"
  wait_for_log_writers "$out_writer" "$err_writer"
  [ -z "$(tail -c 1 "$log")" ] || echo >>"$log"  # the attempt's last line may lack its newline
  echo "supervise: attempt $attempt exited $last" >>"$log"
  case $last in
    0 | 2 | 130 | 143) exit "$last" ;;
    126 | 127)
      # The shell's codes for a command it cannot run: the same command would fail the same way.
      echo "supervise: attempt $attempt exited $last: the command was not found or cannot run" \
        "(${command[0]}): it would fail again" >&2
      exit "$last" ;;
  esac
  if [ -n "$stopped" ]; then
    echo "supervise: stopped by a signal during attempt $attempt (it exited $last): no restart" >&2
    exit "$stopped"
  fi
  if [ "$attempt" -gt "$max_restarts" ]; then
    echo "supervise: attempt $attempt exited $last; no restarts left (--max-restarts $max_restarts)" >&2
    exit "$last"
  fi
  attempt=$((attempt + 1))
  set -m
  sleep "$backoff" &
  set +m
  await_child TERM "the backoff's sleep"
  stop_if_signalled "during the backoff"
  if [ -n "$hook" ]; then
    set -m
    "$hook" "$attempt" "$last" </dev/null >"$hook_out" &
    set +m
    await_child TERM "the hook '$hook'"
    stop_if_signalled "while the hook ran"
    [ "$code" -eq 0 ] || {
      echo "supervise: the hook '$hook' exited non-zero before attempt $attempt: stopping" >&2
      exit "$last"
    }
    read_hook_line
  fi
  wait_for_locks  # before `latest` is read: the ranks may write one more checkpoint
  resume=(--set checkpoint.resume=true)
  dir=$(key_of checkpoint dir) given=$(key_of checkpoint resume)
  if from=$(latest_checkpoint "$dir"); then
    from="resuming from $from"
  elif [ -n "$given" ] && [ "$given" != true ] && [ "$given" != false ]; then
    # A run begun from a given checkpoint (a fine-tune): from that checkpoint again.
    resume=()
    from="no checkpoint in '${dir:-checkpoint.dir}' yet: from checkpoint.resume = \"$given\" again"
  elif [ -z "$dir" ]; then
    # Nothing to resume from (zerolap refuses checkpoint.resume = true without a checkpoint.dir).
    resume=()
    from="no checkpoint.dir: from step 0"
  else
    from="resuming from none yet (no checkpoint in '$dir'): step 0"
  fi
  echo "supervise: restart $((attempt - 1)) of $max_restarts: attempt $attempt after exit $last, $from" >&2
done
