#!/usr/bin/env bash
# Every MPI test case runs in some ctest case: the test cases of the MPI test binary (Catch2's
# --list-test-names-only "*", hidden ones included) must all be selected by the filters that
# tests/mpi/tests.cmake registers with zerolap_add_mpi_test (joined into one Catch2 filter, ','
# being Catch2's "or"). A test case whose tags no registered filter selects - a new tag not added
# to tests/mpi/tests.cmake - fails, named with its file, line and tags. Prints PASS or FAIL.
# Usage: registered_tags_test.sh MPIEXEC MPI_TEST_BINARY FILTERS WORK_DIR
set -u
mpiexec=$1
binary=$2
filters=$3
work=$4
rm -rf "$work" && mkdir -p "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# One rank lists; Catch2 exits with the number of cases listed, so the exit status says nothing.
list() {  # FILTER OUT: "name<TAB>@file:line" per test case
  "$mpiexec" -np 1 --bind-to none --mca btl self,vader "$binary" --list-test-names-only \
    -v high "$1" 2>"$work/stderr.log" | sort >"$2"
}
list "*" "$work/all.txt"
list "$filters" "$work/registered.txt"
if [ ! -s "$work/all.txt" ]; then
  echo "FAIL: $binary listed no test cases:"; cat "$work/stderr.log"; exit 1
fi
comm -23 "$work/all.txt" "$work/registered.txt" >"$work/unregistered.txt"
if [ -s "$work/unregistered.txt" ]; then
  while IFS=$'\t' read -r name at; do
    location=${at#@}
    file=${location%:*} line=${location##*:}
    # The tags: the first "[...]" string of the TEST_CASE (its arguments may span a few lines).
    tags=$(sed -n "${line},$((line + 4))p" "$file" 2>/dev/null | grep -o '"\[[^"]*\]"' | head -1)
    echo "FAIL: $location: test case \"$name\" (tags ${tags:-?}) runs in no ctest case:" \
      "register its tag with zerolap_add_mpi_test in tests/mpi/tests.cmake"
  done <"$work/unregistered.txt"
  exit 1
fi
echo "every one of the $(wc -l <"$work/all.txt") MPI test cases is selected by a registered filter"
echo PASS
