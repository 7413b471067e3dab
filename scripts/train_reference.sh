#!/usr/bin/env bash
# The main job on a fresh machine: installs the Debian packages (scripts/setup.sh), builds, and
# trains the Fashion-MNIST reference MLP data-parallel on 2 ranks under mpirun.
# Usage: bash scripts/train_reference.sh [RANKS] [extra zerolap train arguments...]
set -euo pipefail
cd "$(dirname "$0")/.."
ranks=2
if [[ $# -gt 0 && $1 =~ ^[0-9]+$ ]]; then  # an optional rank count, then zerolap arguments
  ranks=$1
  shift
fi
bash scripts/setup.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$(nproc)" --target zerolap
mpirun -np "$ranks" --oversubscribe build/zerolap train configs/fashion_mnist_mlp.toml "$@"
