#!/usr/bin/env bash
# The whole test suite on a fresh machine: installs the Debian packages (scripts/setup.sh), builds
# (CUDA targets too when nvcc is present: they compile and link, GPU tests skip without a GPU) and
# runs every test under ctest, MPI tests included. Usage: bash scripts/test.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-build}
bash scripts/setup.sh
# Open MPI refuses to run as root unless told it is deliberate (CI runs as root).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release
cmake --build "$build_dir" -j "$(nproc)"
cd "$build_dir"
ctest --output-on-failure --timeout 900 -j "$(nproc)"
