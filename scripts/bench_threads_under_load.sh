#!/usr/bin/env bash
# Training time of one zerolap process on an idle and on a loaded machine, side by side: the
# default (runtime.threads = "auto": libgomp's spinning wait and a team sized to the free CPUs,
# Note [Adaptive CPU team] in runtime/cli/cpu_team_governor.cpp), runtime.threads = 1, "auto"
# with passive threads (OMP_WAIT_POLICY=passive) and "auto" spinning on a fixed team
# (GOMP_SPINCOUNT=300000: libgomp's own default, set explicitly, which keeps the team fixed). The
# load is this script's own: LOAD busy shell loops (default 2), each ended by `timeout` after at
# most the loaded phase's budget, and killed on exit. Prints the median and p10-p90 of the
# training time (the `final` line's seconds, without start-up) of REPEATS runs of each, the
# settings interleaved, and the default's ratios to the targets: loaded within 1.5x of
# runtime.threads = 1, idle no slower than the fixed spinning team.
# Run it on an otherwise idle machine: the idle column is only idle there.
# Usage: scripts/bench_threads_under_load.sh [ZEROLAP] [CONFIG] [STEPS] [REPEATS] [LOAD]
#   defaults: build/zerolap configs/fashion_mnist_mlp.toml 300 5 2
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
zerolap=${1:-$root/build/zerolap}
config=${2:-$root/configs/fashion_mnist_mlp.toml}
steps=${3:-300}
repeats=${4:-5}
load=${5:-2}
[[ -x $zerolap ]] || { echo "bench_threads_under_load: no executable '$zerolap' (build it first)" >&2; exit 2; }
[[ -f $config ]] || { echo "bench_threads_under_load: no config '$config'" >&2; exit 2; }
for n in "$steps" "$repeats" "$load"; do
  [[ $n =~ ^[0-9]+$ && $n -gt 0 ]] || { echo "bench_threads_under_load: STEPS, REPEATS and LOAD must be positive integers" >&2; exit 2; }
done
work=$(mktemp -d)
busy=()
cleanup() {
  for pid in "${busy[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

runs=0
names=("default (auto)" "runtime.threads=1" "auto, passive" "auto, spin fixed team")
settings=(0 1 2 3)
# One run of setting $1; prints its training seconds.
run_one() {
  local extra=() env=(env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT)
  case $1 in
    1) extra=(--set runtime.threads=1) ;;
    2) env+=(OMP_WAIT_POLICY=passive) ;;
    3) env+=(GOMP_SPINCOUNT=300000) ;;
  esac
  local out
  runs=$((runs + 1))
  out=$("${env[@]}" "$zerolap" train "$config" --set train.steps="$steps" \
        --set train.log_every="$steps" --set train.eval_every=0 --set output.dir="$work/run$runs" \
        "${extra[@]}" 2>&1) || { echo "$out" >&2; return 1; }
  sed -n 's/^final step .*(\([0-9.]*\) s).*/\1/p' <<<"$out"
}

stats() {  # median and p10-p90 of the numbers on stdin
  python3 -c '
import statistics, sys
v = sorted(float(x) for x in sys.stdin.read().split())
def q(p):
    i = p * (len(v) - 1); lo = int(i); hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (i - lo)
print(f"{statistics.median(v):8.3f} s  ({q(0.1):.3f}-{q(0.9):.3f})")'
}

measure() {  # $1: phase name; fills $work/$1.<setting>
  for ((r = 0; r < repeats; ++r)); do
    for s in "${settings[@]}"; do run_one "$s" >>"$work/$1.$s"; done
  done
}

echo "zerolap: $("$zerolap" --version | head -1); $(nproc) CPUs; $config, $steps steps, $repeats runs each"
measure idle
# The loaded phase's budget: generous against the idle phase's total, so the load outlasts it.
idle_total=$(cat "$work"/idle.* | python3 -c 'import sys; print(int(sum(float(x) for x in sys.stdin.read().split())))')
budget=$((60 + 40 * (idle_total + 1)))
for ((i = 0; i < load; ++i)); do
  timeout "$budget" bash -c 'while :; do :; done' &
  busy+=($!)
done
measure loaded
for pid in "${busy[@]}"; do kill "$pid" 2>/dev/null || true; done
busy=()

printf '\n%-22s %-30s %-30s\n' "training time" "idle" "loaded ($load busy processes)"
for s in "${settings[@]}"; do
  printf '%-22s %-30s %-30s\n' "${names[$s]}" "$(stats <"$work/idle.$s")" "$(stats <"$work/loaded.$s")"
done
ratio() { python3 -c "import statistics as s; a=[float(x) for x in open('$1').read().split()]; b=[float(x) for x in open('$2').read().split()]; print(f'{s.median(a)/s.median(b):.2f}')"; }
echo
echo "default / runtime.threads=1 (medians): idle $(ratio "$work/idle.0" "$work/idle.1"), loaded $(ratio "$work/loaded.0" "$work/loaded.1")"
echo "default / passive (medians):           idle $(ratio "$work/idle.0" "$work/idle.2"), loaded $(ratio "$work/loaded.0" "$work/loaded.2")"
echo "default / spin fixed team (medians):   idle $(ratio "$work/idle.0" "$work/idle.3"), loaded $(ratio "$work/loaded.0" "$work/loaded.3")"
echo "targets: loaded default / runtime.threads=1 <= 1.5; idle default / spin fixed team <= 1.0 (within noise)"
