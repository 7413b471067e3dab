#!/usr/bin/env bash
# The sanitizer and fuzz jobs (docs/reliability.md), CPU only, with clang:
#   asan: address + undefined behaviour (leaks included) over the unit tests, a set of MPI tests
#         and the fuzz corpus replays (ctest label `sanitize`), in build-asan;
#   fuzz: each libFuzzer target of tests/fuzz for FUZZ_SECONDS (default 30) over its corpus, as
#         many at once as there are CPUs, built in the same build-asan (the targets are
#         instrumented with ASan + UBSan too);
#   tsan: ThreadSanitizer over the comm-thread tests (ctest label `tsan`), in build-tsan; Open
#         MPI (uninstrumented, with its own progress) is suppressed by library name.
# Usage: bash scripts/test_sanitizers.sh [asan] [fuzz] [tsan]   (no argument: all three)
# Environment: FUZZ_SECONDS; ASAN_BUILD_DIR, TSAN_BUILD_DIR (default build-asan, build-tsan).
# Run after scripts/setup.sh (scripts/test.sh does both). A failure in any job fails the script.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
jobs=$(nproc)
fuzz_seconds=${FUZZ_SECONDS:-30}
asan_dir=${ASAN_BUILD_DIR:-build-asan}
tsan_dir=${TSAN_BUILD_DIR:-build-tsan}
steps=("$@")
((${#steps[@]} > 0)) || steps=(asan fuzz tsan)

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Open MPI's start-up allocations are suppressed by name (tests/sanitizers/lsan.supp), leak
# detection stays on; the slow unwinder is needed to see the libmpi frame under an unloaded
# component (see the file). mpirun hands the environment to the ranks it starts.
export ASAN_OPTIONS=detect_leaks=1:fast_unwind_on_malloc=0:detect_stack_use_after_return=0
export LSAN_OPTIONS=suppressions=$root/tests/sanitizers/lsan.supp:print_suppressions=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export TSAN_OPTIONS=suppressions=$root/tests/sanitizers/tsan.supp:halt_on_error=1:second_deadlock_stack=1

configure() {  # configure DIR SANITIZERS [extra cmake args]
  local dir=$1 sanitize=$2
  shift 2
  CC=clang CXX=clang++ cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZEROLAP_CUDA=OFF \
    -DZEROLAP_SANITIZE="$sanitize" "$@"
}

for step in "${steps[@]}"; do
  case $step in
    asan)
      echo "== sanitizers: address,undefined"
      configure "$asan_dir" address,undefined -DZEROLAP_FUZZ=ON
      cmake --build "$asan_dir" -j "$jobs"
      (cd "$asan_dir" && ctest -L sanitize -LE cuda --output-on-failure --timeout 900 -j "$jobs")
      ;;
    fuzz)
      echo "== fuzz: ${fuzz_seconds} s per target"
      configure "$asan_dir" address,undefined -DZEROLAP_FUZZ=ON
      cmake --build "$asan_dir" -j "$jobs" --target fuzz_config fuzz_idx fuzz_safetensors fuzz_flags fuzz_latest
      # The targets run $jobs at a time, each with its own log, printed when it ends.
      fuzz_one() {  # fuzz_one TARGET: runs it, its output in $asan_dir/fuzz/TARGET/log
        local target=$1 work=$asan_dir/fuzz/$1
        local dict=()
        [[ -f tests/fuzz/$target.dict ]] && dict=(-dict="tests/fuzz/$target.dict")
        "$asan_dir/tests/fuzz/fuzz_$target" -max_total_time="$fuzz_seconds" -timeout=10 \
          -rss_limit_mb=2560 -print_final_stats=1 -print_funcs=0 -artifact_prefix="$work/" \
          "${dict[@]}" "$work/new" "tests/fuzz/corpus/$target" > "$work/log" 2>&1
      }
      declare -A fuzz_pids=()
      fuzz_failed=()
      fuzz_reap() {  # waits for one target (any), prints its log, records a failure
        local pid target
        wait -n -p pid "${!fuzz_pids[@]}" && status=0 || status=$?
        target=${fuzz_pids[$pid]}
        unset "fuzz_pids[$pid]"
        echo "-- fuzz_$target (exit $status)"
        cat "$asan_dir/fuzz/$target/log"
        ((status == 0)) || fuzz_failed+=("$target")
      }
      for target in config idx safetensors flags latest; do
        # New inputs go to a scratch folder; the corpus in the repo is only read. A crash leaves
        # crash-<sha1> in $asan_dir/fuzz/<target>/: add it to tests/fuzz/corpus/<target>/ with a unit test.
        mkdir -p "$asan_dir/fuzz/$target/new"
        ((${#fuzz_pids[@]} < jobs)) || fuzz_reap
        fuzz_one "$target" &
        fuzz_pids[$!]=$target
      done
      while ((${#fuzz_pids[@]} > 0)); do fuzz_reap; done
      if ((${#fuzz_failed[@]} > 0)); then
        echo "test_sanitizers.sh: fuzz target(s) failed: ${fuzz_failed[*]}" >&2
        exit 1
      fi
      ;;
    tsan)
      echo "== sanitizers: thread"
      configure "$tsan_dir" thread
      cmake --build "$tsan_dir" -j "$jobs" --target zerolap_mpi_tests zerolap_tsan_unit_tests
      (cd "$tsan_dir" && ctest -L tsan --output-on-failure --timeout 900 -j "$jobs")
      ;;
    *)
      echo "test_sanitizers.sh: unknown job '$step' (asan, fuzz or tsan)" >&2
      exit 2
      ;;
  esac
done
echo "test_sanitizers.sh: ${steps[*]} passed"
