#!/usr/bin/env bash
# Which CPU GEMM kernel is fastest here, measured by hand (docs/bench.md "The CPU GEMM"): one
# thread, GFLOP/s of OpenBLAS's cblas_sgemm under its own choice of core and under each
# OPENBLAS_CORETYPE, and of oneDNN's f32 and bf16 matmul, on 64x1024x1024 and the GEMM shapes
# of configs/bench_overlap.toml (batch 128). Needs libopenblas-dev (not a zerolap dependency) and
# libdnnl-dev. Usage: scripts/gemm_kernels.sh [CORE...]   (default: a list of x86-64 cores)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=$(mktemp -d)/gemm_kernels
trap 'rm -rf "$(dirname "$bin")"' EXIT
cblas=/usr/include/x86_64-linux-gnu/openblas-pthread
[[ -f $cblas/cblas.h ]] || { echo "gemm_kernels: needs libopenblas-dev (apt-get install libopenblas-dev)" >&2; exit 2; }
g++ -O2 -std=c++17 -I"$cblas" "$root/scripts/gemm_kernels.cpp" -o "$bin" -lopenblas -ldnnl
shapes=(forward 64 1024 1024
  forward 128 1024 512 forward 128 1024 1024 forward 128 512 1024
  backward_data 128 512 1024 backward_data 128 1024 1024
  backward_weight 1024 512 128 backward_weight 1024 1024 128 backward_weight 512 1024 128)
echo "shapes (pass m n k): $(printf '%s %s %s %s | ' "${shapes[@]}")"
cores=("$@")
((${#cores[@]})) || cores=(Prescott Sandybridge Haswell Zen SkylakeX Cooperlake)
export OMP_NUM_THREADS=1
env -u OPENBLAS_CORETYPE "$bin" openblas "${shapes[@]}" | sed 's/^/(own choice) /'
for core in "${cores[@]}"; do
  # OpenBLAS 0.3.21 cannot be forced to Cooperlake by name (its lookup stops one entry short):
  # the name is not found, and it falls back to a choice by CPU features.
  OPENBLAS_CORETYPE=$core "$bin" openblas "${shapes[@]}" | sed "s/^/(CORETYPE=$core) /"
done
env -u ONEDNN_MAX_CPU_ISA "$bin" onednn "${shapes[@]}"
