#!/usr/bin/env bash
# Fetches, on a Debian 12 machine with package access (the dev/CI image), the .deb files that
# scripts/gpu_check.sh needs on a GPU machine that has nvcc and CMake but no package registry and
# maybe no Open MPI, oneDNN, toml++, CLI11, nlohmann-json, fmt, Catch2 or zlib headers. They go
# to .gpu_bundle/ (git-ignored; ~17 MiB, so it travels with the working tree) and are unpacked by
# gpu_check.sh with `dpkg -x` into a private prefix, never into /.
#   scripts/gpu_bundle.sh            # then run scripts/gpu_check.sh on the GPU machine
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bundle=${GPU_BUNDLE_DIR:-$root/.gpu_bundle}

# Runtime and -dev packages, and the shared libraries they load that a bare Ubuntu/Debian image
# may lack (found with objdump -p NEEDED over every .so and binary of the set; libc6, libstdc++6
# and libgcc-s1 are assumed, as nvcc needs them). Plugins whose extra libraries are absent (e.g.
# InfiniBand transports) simply do not load; a single node needs only shared memory.
packages=(
  # Open MPI 4.1 (mpirun, mpicxx wrapper, headers) and what libmpi, orted and PMIx load
  openmpi-bin openmpi-common libopenmpi3 libopenmpi-dev
  libpmix2 libhwloc15 libevent-core-2.1-7 libevent-pthreads-2.1-7 libmunge2 libudev1 libltdl7
  libnuma1 libfabric1 libucx0 libpsm-infinipath1 libpsm2-2 libibverbs1 ibverbs-providers
  librdmacm1 libnl-3-200 libnl-route-3-200 libatomic1 libuuid1
  # oneDNN (the CPU GEMM), the OpenCL loader it links and GNU OpenMP, which runs its kernels
  libdnnl2 libdnnl-dev ocl-icd-libopencl1 libgomp1
  # header and config packages, and the shared libraries behind them
  libtomlplusplus-dev libtomlplusplus3 libcli11-dev nlohmann-json3-dev libfmt-dev libfmt9 catch2
  zlib1g-dev zlib1g
)

if ! command -v apt-get >/dev/null || ! command -v dpkg-deb >/dev/null; then
  echo "gpu_bundle: needs apt-get and dpkg-deb (a Debian 12 machine with package access)" >&2
  exit 2
fi
. /etc/os-release
if [[ "${VERSION_CODENAME:-}" != "bookworm" ]]; then
  echo "gpu_bundle: warning: made on ${PRETTY_NAME:-an unknown system}, tested on Debian 12" >&2
fi

rm -rf "$bundle/debs"
mkdir -p "$bundle/debs"
cd "$bundle/debs"
# apt-get download fetches exactly the named packages (no dependency resolution: the list above
# is the closure that matters). As root, apt warns that it cannot drop privileges here; harmless.
apt-get download -q "${packages[@]}" 2>&1 | grep -vE "^Get:|Download is performed unsandboxed" || true
missing=()
for p in "${packages[@]}"; do
  compgen -G "${p}_*.deb" >/dev/null || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "gpu_bundle: could not download: ${missing[*]}" >&2
  exit 1
fi

{
  echo "# Made by scripts/gpu_bundle.sh on $(date -u +%Y-%m-%dT%H:%MZ) from ${PRETTY_NAME:-?}"
  echo "# glibc of the packages' distribution: $(ldd --version | head -1 | awk '{print $NF}')"
  for f in *.deb; do dpkg-deb --show --showformat='${Package} ${Version} ${Architecture}\n' "$f"; done
} >"$bundle/MANIFEST"
sha256sum *.deb >"$bundle/SHA256SUMS"
echo "gpu_bundle: ${#packages[@]} packages, $(du -sh "$bundle" | cut -f1) in $bundle"
