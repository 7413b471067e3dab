#!/usr/bin/env bash
# Installs everything zerolap needs to build, test and train, from Debian packages only.
# Idempotent: packages already present are skipped; `apt-get update` runs once, only when
# something is missing. Run as root (or with sudo available).
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  libopenmpi-dev openmpi-bin
  libdnnl-dev   # oneDNN: the CPU GEMM (kernels/gemm.cpp)
  libtomlplusplus-dev
  libcli11-dev
  nlohmann-json3-dev
  zlib1g-dev
  catch2
  libfmt-dev
  dataset-fashion-mnist
  python3-matplotlib
  procps   # pgrep, for the kill-a-rank test
  # scripts/test_sanitizers.sh: clang with its sanitizer and libFuzzer runtimes, and
  # llvm-symbolizer for readable sanitizer reports
  clang libclang-rt-dev llvm
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

# The commands the build and the jobs run: a package can be installed while its command is not on
# PATH (a removed alternative, a PATH without /usr/bin), and the build would fail later.
missing_commands() {
  local cmd
  for cmd in cmake g++ mpirun mpicxx python3; do
    command -v "$cmd" >/dev/null 2>&1 || echo "$cmd"
  done
}

if ((${#missing[@]} == 0)); then
  gone=$(missing_commands | tr '\n' ' ')
  if [[ -n $gone ]]; then
    echo "setup: the packages are installed, but not on PATH: ${gone% } (mpirun, mpicxx: package" \
      "openmpi-bin, see \`update-alternatives --display mpirun\`; cmake: cmake; g++: build-essential)" >&2
    exit 1
  fi
  echo "setup: all packages present"
  exit 0
fi

sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
echo "setup: installing ${missing[*]}"
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
