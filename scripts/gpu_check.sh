#!/usr/bin/env bash
# The GPU check (issue 7): one script, under 8 minutes, for a machine with an NVIDIA GPU, nvcc and
# CMake but no package registry. It unpacks the .debs of scripts/gpu_bundle.sh (.gpu_bundle/, made
# beforehand on a networked Debian 12 machine) into a private prefix, builds with CUDA, runs the
# CUDA tests (kernels and models vs the CPU, one-rank training vs the CPU), trains the
# Fashion-MNIST-shaped MLP on synthetic data on one GPU, runs `zerolap bench
# configs/bench_large.toml` on one rank without and with a modelled 8-rank link and checks the
# bench's figures (scripts/bench_gpu_checks.py), and measures the fused Adam kernel's bandwidth
# against the device's copy bandwidth. Results: $OUT/gpu_check.md (OUT defaults to ./gpu_check_out), logs in
# $OUT/logs. Exit 0 when every phase passed.
#
# Environment:
#   OUT=dir                 where results go
#   CUDA_ARCH=90            CMAKE_CUDA_ARCHITECTURES (e.g. "80;90")
#   GPU_CHECK_DRY_RUN=1     stop before anything that needs a GPU (a rehearsal on a CPU machine:
#                           unpack, build with CUDA, run the CUDA tests, which skip, and a CPU
#                           training under the unpacked Open MPI)
#   GPU_CHECK_USE_SYSTEM=1  use installed packages instead of the bundle
#   GPU_CHECK_HIDE_SYSTEM=1 rehearsal only (root): hide this machine's own copies of the bundled
#                           packages (overlay whiteouts in a private mount namespace) first
#   GPU_CHECK_BUDGET_S=450  total time budget; phases that no longer fit are skipped
#   GPU_CHECK_PHASE_SCALE=1 multiplies every phase's time limit (a slow rehearsal machine)
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bundle=${GPU_BUNDLE_DIR:-$root/.gpu_bundle}
work=${GPU_CHECK_WORK:-$root/build-gpu-check}
OUT=${OUT:-$root/gpu_check_out}
arch=x86_64-linux-gnu
dry=${GPU_CHECK_DRY_RUN:-0}
use_system=${GPU_CHECK_USE_SYSTEM:-0}

# --- rehearsal: re-run in a mount namespace where the system's copies are hidden ---------------
if [[ "${GPU_CHECK_HIDE_SYSTEM:-0}" == 1 && -z "${ZL_GPU_CHECK_HIDDEN:-}" ]]; then
  exec unshare -m env ZL_GPU_CHECK_HIDDEN=1 bash "${BASH_SOURCE[0]}" "$@"
fi
if [[ -n "${ZL_GPU_CHECK_HIDDEN:-}" ]]; then
  hide=$work/hide
  rm -rf "$hide" && mkdir -p "$hide"/{usr,etc}/{u,w}
  # Whiteouts (0/0 character devices in an overlay's upper dir) make a lower file vanish. Every
  # non-directory a bundled package installed here goes, except libraries every system has.
  awk '!/^#/ {print $1}' "$bundle/MANIFEST" | grep -vxE 'zlib1g|libudev1|libuuid1' |
    xargs dpkg -L 2>/dev/null | while read -r f; do
      case $f in /lib/* | /lib64/* | /bin/* | /sbin/*) f=/usr$f ;; esac  # merged /usr
      case $f in /usr/* | /etc/*) ;; *) continue ;; esac
      [[ -L "$f" || (-e "$f" && ! -d "$f") ]] || continue
      top=${f#/} && top=${top%%/*} && rel=${f#/"$top"/}
      mkdir -p "$hide/$top/u/$(dirname "$rel")" && mknod "$hide/$top/u/$rel" c 0 0 2>/dev/null
    done
  for top in usr etc; do
    mount -t overlay overlay -o "lowerdir=/$top,upperdir=$hide/$top/u,workdir=$hide/$top/w" "/$top"
  done
  for probe in /usr/include/toml++/toml.h /usr/include/mpi.h /usr/bin/mpirun.openmpi \
      /usr/lib/$arch/libmpi.so.40 /usr/lib/$arch/libdnnl.so.2; do
    [[ -e $probe ]] && { echo "gpu_check: could not hide $probe" >&2; exit 1; }
  done
  echo "gpu_check: rehearsal with the system's copies of the bundled packages hidden"
fi

mkdir -p "$OUT/logs" "$work"
report=$OUT/gpu_check.md
deadline=$((SECONDS + ${GPU_CHECK_BUDGET_S:-450}))
rows=()
failed=()  # phases whose log tail goes into the report
failures=0

# phase NAME MAX_SECONDS COMMAND...: runs with a timeout that also respects the budget; output in
# $OUT/logs/NAME.log; one row of the phase table.
phase() {
  local name=$1 max=$(($2 * ${GPU_CHECK_PHASE_SCALE:-1})) rc status begin left
  shift 2
  left=$((deadline - SECONDS))
  if ((left < 15)); then
    rows+=("| $name | skipped: time budget spent | - |")
    failures=$((failures + 1))
    return 99
  fi
  ((max > left)) && max=$left
  echo "== $name (limit ${max} s)"
  begin=$SECONDS
  timeout --kill-after=10 "$max" "$@" >"$OUT/logs/$name.log" 2>&1
  rc=$?
  if ((rc == 0)); then status=ok
  elif ((rc == 124 || rc == 137)); then status="TIMEOUT after ${max} s"
  else status="FAILED (exit $rc)"
  fi
  ((rc == 0)) || { failures=$((failures + 1)); failed+=("$name"); }
  rows+=("| $name | $status | $((SECONDS - begin)) |")
  echo "   $status in $((SECONDS - begin)) s"
  return $rc
}

# --- 1. the dependency prefix ------------------------------------------------------------------
prefix=$work/prefix
unpack() {
  [[ -f "$bundle/SHA256SUMS" ]] || { echo "no bundle in $bundle: run scripts/gpu_bundle.sh"; return 1; }
  (cd "$bundle/debs" && sha256sum --quiet -c ../SHA256SUMS) || return 1
  rm -rf "$prefix" && mkdir -p "$prefix"
  local deb member
  for deb in "$bundle"/debs/*.deb; do
    if command -v dpkg-deb >/dev/null; then
      dpkg-deb -x "$deb" "$prefix" || return 1
    else  # not a Debian-like system: a .deb is an ar archive holding data.tar.*
      member=$(ar t "$deb" | grep '^data\.tar') || return 1
      case $member in
        *.xz) ar p "$deb" "$member" | tar -x --xz -f - -C "$prefix" ;;
        *.zst) ar p "$deb" "$member" | tar -x --zstd -f - -C "$prefix" ;;
        *.gz) ar p "$deb" "$member" | tar -x -z -f - -C "$prefix" ;;
        *) ar p "$deb" "$member" | tar -x -f - -C "$prefix" ;;
      esac || return 1
    fi
  done
  # Merged /usr, as on current systems: some packages ship /lib/<arch>/*. Absolute symlinks
  # (libz.so -> /lib/...) would point at the system's files: point them into the prefix.
  if [[ -d "$prefix/lib" && ! -L "$prefix/lib" ]]; then
    cp -a "$prefix/lib/." "$prefix/usr/lib/" && rm -rf "$prefix/lib" && ln -s usr/lib "$prefix/lib"
  fi
  find "$prefix" -type l -lname '/*' | while read -r link; do
    local target
    target=$(readlink "$link")
    [[ $target == /lib/* ]] && target=/usr$target
    ln -sfn "$prefix$target" "$link"
  done
  # What the packages' maintainer scripts would have linked (update-alternatives, not run here).
  local l=$prefix/usr/lib/$arch b=$prefix/usr/bin
  ln -sf ../../lib/libpsm1/libpsm_infinipath.so.1.16 "$l/libpsm_infinipath.so.1"
  for tool in mpirun mpiexec mpicc mpicxx mpic++; do ln -sf "$tool.openmpi" "$b/$tool"; done
  echo "unpacked $(ls "$bundle"/debs/*.deb | wc -l) packages into $prefix"
  # The bundle's binaries need the glibc of the distribution they came from.
  local need have
  need=$(awk '/^# glibc/ {print $NF}' "$bundle/MANIFEST")
  have=$(ldd --version | head -1 | awk '{print $NF}')
  if [[ -n "$need" ]] && [[ $(printf '%s\n%s\n' "$need" "$have" | sort -V | head -1) != "$need" ]]; then
    echo "WARNING: this system's glibc $have is older than the bundle's $need; some libraries"
    echo "(libevent needs GLIBC_2.36) may fail to load: use GPU_CHECK_USE_SYSTEM=1 if Open MPI is installed"
  fi
}
cmake_hints=()
if [[ "$use_system" != 1 ]]; then
  phase unpack 120 bash -c "$(declare -f unpack); prefix='$prefix' bundle='$bundle' arch='$arch' unpack" ||
    { echo "gpu_check: unpacking failed (see $OUT/logs/unpack.log)"; }
  p=$prefix/usr
  export PATH=$p/bin:$PATH
  export LD_LIBRARY_PATH=$p/lib/$arch:$p/lib/$arch/openmpi/lib:$p/lib/$arch/pmix2/lib:$p/lib/libpsm1${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  # A relocated Open MPI finds its plugins, help files and wrapper data through OPAL_PREFIX.
  export OPAL_PREFIX=$p OPAL_SYSCONFDIR=$prefix/etc/openmpi
  # PMIx ignores OPAL_PREFIX: point it at its plugins (pcompress, psec, ...) directly.
  export PMIX_PREFIX=$p/lib/$arch/pmix2 PMIX_MCA_mca_base_component_path=$p/lib/$arch/pmix2/lib/pmix
  export CMAKE_PREFIX_PATH=$p${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
  cmake_hints=(-DMPI_CXX_COMPILER="$p/bin/mpicxx.openmpi" -DMPIEXEC_EXECUTABLE="$p/bin/mpirun.openmpi"
    -DZEROLAP_DNNL_INCLUDE="$p/include" -DZEROLAP_DNNL_LIBRARY="$p/lib/$arch/libdnnl.so")
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
mpirun_1=(mpirun -np 1 --bind-to none --mca btl self,vader)

# --- 2. configure and build --------------------------------------------------------------------
build=$work/build
phase configure 120 cmake -S "$root" -B "$build" -DZEROLAP_CUDA=ON -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" "${cmake_hints[@]}"
# Every dependency must come from the prefix (the system may hold copies of its own).
check_prefix() {
  local cache=$build/CMakeCache.txt bad=0 var value
  for var in MPI_CXX_COMPILER MPI_mpi_LIBRARY MPI_CXX_HEADER_DIR fmt_DIR nlohmann_json_DIR \
      CLI11_DIR Catch2_DIR tomlplusplus_DIR ZLIB_INCLUDE_DIR ZLIB_LIBRARY_RELEASE \
      ZEROLAP_DNNL_INCLUDE ZEROLAP_DNNL_LIBRARY; do
    value=$(grep -E "^$var(:[A-Z]+)?=" "$cache" | head -1 | cut -d= -f2-)
    printf '%-26s %s\n' "$var" "${value:-<not set>}"
    [[ "$value" == "$prefix"/* ]] || bad=1
  done
  return $bad
}
if [[ "$use_system" != 1 ]]; then
  phase prefix_check 30 bash -c "$(declare -f check_prefix); build='$build' prefix='$prefix' check_prefix"
fi
phase build 330 cmake --build "$build" -j "$(nproc)"

# --- 3. CUDA tests (they skip, with a WARN, where no GPU is visible) ------------------------------
catch=(--use-colour no)
phase test_cuda_units 120 "$build/tests/zerolap_tests" "[cuda]" "${catch[@]}"
phase test_device 60 "${mpirun_1[@]}" "$build/tests/zerolap_mpi_tests" "[device]" "${catch[@]}"
phase test_cuda_train 240 "${mpirun_1[@]}" "$build/tests/zerolap_mpi_tests" "[cuda-train]" \
  "${catch[@]}"

# --- 4. training: the 784-256-256-10 MLP on synthetic Fashion-MNIST-shaped data ------------------
train_args=(train "$root/configs/fashion_mnist_mlp.toml" --set data.kind=teacher
  --set data.teacher_task=classification --set data.train_samples=60000
  --set data.test_samples=10000 --set train.log_every=500)
if [[ "$dry" == 1 ]]; then
  # The relocated Open MPI must really launch ranks: two CPU ranks, a few steps.
  phase train_cpu_2ranks 120 mpirun -np 2 --bind-to none --mca btl self,vader "$build/zerolap" \
    "${train_args[@]}" --set runtime.device=cpu --set train.steps=50 --set train.epochs=0 \
    --set output.dir="\"$work/runs/cpu2\""
else
  phase train_gpu_ddp 90 "${mpirun_1[@]}" "$build/zerolap" "${train_args[@]}" \
    --set runtime.device=cuda --set output.dir="\"$work/runs/gpu_ddp\""
  phase train_gpu_zero 90 "${mpirun_1[@]}" "$build/zerolap" "${train_args[@]}" \
    --set runtime.device=cuda --set parallel.mode=zero --set parallel.overlap=interleaved \
    --set parallel.collective=reduce_broadcast --set output.dir="\"$work/runs/gpu_zero\""
  for dev in cpu cuda; do
    phase "train_300_steps_$dev" 90 "${mpirun_1[@]}" "$build/zerolap" "${train_args[@]}" \
      --set runtime.device=$dev --set train.steps=300 --set train.epochs=0 --set runtime.threads=4 \
      --set output.dir="\"$work/runs/steps_$dev\""
  done
fi

# --- 5. bandwidth and 6. bench -----------------------------------------------------------------
phase bandwidth 60 "$build/tests/zerolap_tests" "[gpu-bandwidth]" "${catch[@]}"
if [[ "$dry" != 1 ]]; then
  if [[ -f "$root/configs/bench_large.toml" ]]; then
    # The bench on one GPU, without and then with a modelled link (link.ranks = 8, a bandwidth at
    # which one step's modelled reduce + broadcast take 0.9x the measured compute step), three
    # modes at one cap; scripts/bench_gpu_checks.py prints both tables and the done-when checks.
    bench_args=(bench "$root/configs/bench_large.toml" --set runtime.device=cuda
      --set 'bench.bucket_cap_mb=[25.0]' --set bench.warmup=5 --set bench.steps=20
      --set 'bench.modes=["ddp", "zero/none/reduce_broadcast", "zero/interleaved/reduce_broadcast"]')
    phase bench_large 150 "${mpirun_1[@]}" "$build/zerolap" "${bench_args[@]}" \
      --set output.dir="\"$OUT/bench_large\""
    link_gbps=$(python3 "$root/scripts/bench_gpu_checks.py" link-bandwidth "$OUT/bench_large/bench.json" \
      2>/dev/null | awk '{printf "%.6g", $1 / 0.9}')
    phase bench_link8 150 "${mpirun_1[@]}" "$build/zerolap" "${bench_args[@]}" --set link.ranks=8 \
      --set link.bandwidth_gbps="${link_gbps:-400}" --set output.dir="\"$OUT/bench_link8\""
    phase bench_checks 30 python3 "$root/scripts/bench_gpu_checks.py" report \
      "$OUT/bench_large/bench.json" "$OUT/bench_link8/bench.json"
  else
    rows+=("| bench_large | missing: configs/bench_large.toml is not in this tree | - |")
    failures=$((failures + 1))
  fi
fi

# --- 7. zerolap against PyTorch (scripts/compare_torch.py; needs PyTorch with CUDA here) ---------
# fp32, then bf16 (PyTorch: autocast + fused AdamW), 1 rank, one cap and zerolap's three modes of
# the bench phases: PyTorch's 4 modes (DDP, ZeroRedundancyOptimizer and both ddp_zero_hook overlap
# hooks on NCCL) and zerolap's 3 take well under a minute each on an H200.
if [[ "$dry" != 1 && -f "$root/configs/bench_large.toml" ]]; then
  for precision in fp32 bf16; do
    phase "compare_torch_$precision" 120 python3 "$root/scripts/compare_torch.py" \
      "$root/configs/bench_large.toml" --device cuda --world 1 --zerolap "$build/zerolap" \
      --set 'bench.bucket_cap_mb=[25.0]' --set precision.compute="$precision" \
      --set 'bench.modes=["ddp", "zero/none/reduce_broadcast", "zero/interleaved/reduce_broadcast"]'
  done
fi

skipped=$(grep -l "no CUDA device visible" "$OUT"/logs/{test_cuda_units,test_cuda_train,bandwidth}.log \
  2>/dev/null | xargs -r -n1 basename)
if [[ -n "$skipped" && "$dry" != 1 ]]; then
  failures=$((failures + 1))  # on a GPU machine a skipped CUDA test is a failure
fi

# --- the report --------------------------------------------------------------------------------
final_line() { grep -h "^final step" "$OUT/logs/$1.log" 2>/dev/null | tail -1; }
{
  echo "# zerolap GPU check"
  echo
  echo "$(date -u +%Y-%m-%dT%H:%MZ), $(hostname), commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')$([[ -n $(git -C "$root" status --porcelain 2>/dev/null) ]] && echo ' (+ local changes)')"
  [[ "$dry" == 1 ]] && echo && echo "**Dry run** (GPU_CHECK_DRY_RUN=1): nothing ran on a GPU."
  echo
  echo '```'
  (nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null ||
    echo "nvidia-smi: not available")
  nvcc --version 2>/dev/null | tail -1
  cmake --version | head -1
  echo "glibc $(ldd --version | head -1 | awk '{print $NF}'), $(nproc) CPUs"
  echo "dependencies: $([[ "$use_system" == 1 ]] && echo "system packages" || echo "bundle unpacked in $prefix")"
  echo '```'
  echo
  echo "| phase | result | seconds |"
  echo "|---|---|---|"
  printf '%s\n' "${rows[@]}"
  echo
  if [[ -n "$skipped" ]]; then
    echo "CUDA tests **skipped** (no CUDA device visible) in: $(echo $skipped)"
    echo
  fi
  echo "## CUDA tests"
  echo '```'
  for t in test_cuda_units test_device test_cuda_train; do
    echo "$t: $(grep -hE "^(All tests passed|test cases:)" "$OUT/logs/$t.log" 2>/dev/null | tail -1)"
  done
  echo '```'
  if [[ "$dry" != 1 ]]; then
    echo "## Training (784-256-256-10 MLP, synthetic teacher data shaped like Fashion-MNIST, 1 GPU)"
    echo '```'
    for t in train_gpu_ddp train_gpu_zero train_300_steps_cpu train_300_steps_cuda; do
      echo "$t: $(final_line $t)"
      grep -h "samples/s" "$OUT/logs/$t.log" 2>/dev/null | tail -1 | sed 's/^/    last log: /'
    done
    echo '```'
    echo "## Fused Adam bandwidth"
    echo '```'
    grep -h "^GPU_BANDWIDTH" "$OUT/logs/bandwidth.log" 2>/dev/null || echo "no measurement"
    echo '```'
    echo "## zerolap bench configs/bench_large.toml (1 rank, cap 25 MiB; the link: ${link_gbps:-?} Gb/s as 8 ranks)"
    cat "$OUT/logs/bench_checks.log" 2>/dev/null || echo "no bench checks"
    for precision in fp32 bf16; do
      echo "## zerolap vs PyTorch, $precision (scripts/compare_torch.py configs/bench_large.toml, 1 rank, cap 25 MiB)"
      echo '```'
      grep -vE "^\s*$" "$OUT/logs/compare_torch_$precision.log" 2>/dev/null | tail -12
      echo '```'
    done
    # The mixed-precision goal on bench_large at 1 rank: bf16 <= 1.5 ms per step and <= 0.8x
    # PyTorch's best (bf16 autocast + fused AdamW), from the bf16 comparison's "best:" line.
    awk '/^best: zerolap/ {
           for (i = 1; i <= NF; ++i) if ($i == "ms") { ms = (ms == "" ? $(i - 1) : ms) }
           ratio = $NF; sub(/x$/, "", ratio)
           printf "bf16 goal: best %s ms per step (<= 1.5: %s), %sx PyTorch (<= 0.8: %s)\n", ms,
                  (ms + 0 <= 1.5 ? "PASS" : "FAIL"), ratio, (ratio + 0 <= 0.8 ? "PASS" : "FAIL")
           found = 1 }
         END { if (!found) print "bf16 goal: no comparison (see compare_torch_bf16.log)" }' \
      "$OUT/logs/compare_torch_bf16.log" 2>/dev/null
  else
    echo "## CPU training under the unpacked Open MPI (2 ranks)"
    echo '```'
    final_line train_cpu_2ranks
    echo '```'
  fi
  if ((${#failed[@]})); then
    echo "## Failed phases (last lines of their logs)"
    for f in "${failed[@]}"; do
      echo "### $f"
      echo '```'
      grep -vE "^\s*$|^-+$" "$OUT/logs/$f.log" 2>/dev/null | tail -n 8
      echo '```'
    done
  fi
  if [[ "$use_system" != 1 ]]; then
    echo "## Dependency paths (CMakeCache)"
    echo '```'
    cat "$OUT/logs/prefix_check.log" 2>/dev/null
    echo '```'
  fi
} >"$report"
[[ -f "$OUT/logs/build.log" ]] && tail -n 200 "$OUT/logs/build.log" >"$OUT/logs/build.tail.log" &&
  rm "$OUT/logs/build.log"

echo "gpu_check: $failures failed or skipped phase(s); report: $report"
((failures == 0))
