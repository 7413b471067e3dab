#!/usr/bin/env bash
# Shows that GCC vectorises the CPU optimizer loops (kernels/optimizer_kernels.cpp): compiles the
# file with the project's flags plus -fopt-info-vec-optimized and prints the "loop vectorized"
# reports of every loop over adam_update / sgd_update. Exits 1 if one of those loops is scalar.
# A loop reports once per template instantiation and once per x86-64 level it is cloned for (64, 32
# and 16 byte vectors: Note [ISA clones], kernels/cpu_clones.h), and its tail loop "8 byte vectors".
# Usage: scripts/show_vectorization.sh [build-dir]   (flags from its compile_commands.json; without
# one, the flags of a default Release build: -O3 -DNDEBUG -std=c++20 -fno-math-errno ...)
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${1:-$repo/build}
src=$repo/kernels/optimizer_kernels.cpp

flags=$(python3 - "$build_dir/compile_commands.json" "$src" <<'PY' 2>/dev/null || true
import json, shlex, sys
db_path, src = sys.argv[1], sys.argv[2]
for entry in json.load(open(db_path)):
    if entry["file"] == src:
        args = entry.get("arguments") or shlex.split(entry["command"])
        out, skip = [], False
        for a in args[1:]:
            if skip:
                skip = False
                continue
            if a in ("-o", "-c"):
                skip = True
                continue
            if a == src:
                continue
            out.append(a)
        print(shlex.join([args[0]] + out))
        break
PY
)
if [[ -n $flags ]]; then
  echo "flags from $build_dir/compile_commands.json:"
else
  flags="${CXX:-g++} -O3 -DNDEBUG -std=c++20 -Wall -Wextra -fno-math-errno -I$repo"
  echo "no compile_commands.json entry in $build_dir; default Release flags:"
fi
echo "  $flags"

# shellcheck disable=SC2086  # $flags is a command line
report=$(cd "$repo" && $flags -fopt-info-vec-optimized -c "$src" -o /dev/null 2>&1)

status=0
while IFS=: read -r line _; do
  code=$(sed -n "${line}p" "$src" | sed 's/^ *//')
  hits=$(grep -E "optimizer_kernels\.cpp:${line}:[0-9]+: optimized: loop vectorized" <<<"$report" ||
         true)
  echo
  echo "line $line: $code"
  if [[ -z $hits ]]; then
    echo "  NOT VECTORISED"
    status=1
  else
    sed 's/^/  /' <<<"$hits"
  fi
done < <(grep -nE 'for \(.*(adam|sgd)_update\(' "$src")
exit $status
