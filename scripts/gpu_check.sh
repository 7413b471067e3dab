#!/usr/bin/env bash
# The GPU check: one short run, for a machine with an NVIDIA GPU, nvcc and CMake but maybe no
# package registry, that proves the GPU path, most valuable phase first, within a budget that holds
# by construction: every phase has a time limit, and the script refuses to start when the limits
# add up to more than GPU_CHECK_BUDGET_S. `scripts/gpu_check.sh --plan` prints the phases in run
# order with their limits and their sum. It unpacks the .debs of scripts/gpu_bundle.sh
# (.gpu_bundle/) into a private prefix (or uses the system's packages), builds the three targets
# it runs, and runs the CUDA units, CUDA-vs-CPU training, one bench of configs/bench_large.toml
# (fp32, tf32, bf16; ddp and the best zero mode; without and with link.ranks = 8, checked against
# the bench's own model by scripts/bench_gpu_checks.py), the non-finite check on CUDA and the
# PyTorch comparison in bf16 and fp32. $OUT (default ./gpu_check_out) holds two files, rewritten
# after every phase: gpu_check.md (one short table per phase) and gpu_check_logs.tar.gz. Exit 0
# when every phase passed, 2 when the plan exceeds the budget, else 1. docs/gpu.md says how to run it.
#
# Environment:
#   OUT=dir                    where the report and the log archive go (nothing else is written there)
#   CUDA_ARCH=90               CMAKE_CUDA_ARCHITECTURES (e.g. "80;90")
#   GPU_CHECK_BUDGET_S=510     the phases after unpacking may take at most this (their limits' sum)
#   GPU_CHECK_PHASE_SCALE=1    multiplies every limit and the budget (a slower rehearsal machine)
#   GPU_CHECK_USE_SYSTEM=1     use installed packages instead of the bundle
#   GPU_CHECK_REHEARSAL=1      rehearse on a CPU machine: every phase runs its real command; the
#                              CUDA tests skip (not a failure here), the bench and the non-finite
#                              check run on the CPU with a small model, the bench's timing checks
#                              are reported but not enforced, and the PyTorch comparison runs on
#                              the CPU where PyTorch is installed (else only up to its import)
#   GPU_CHECK_HIDE_SYSTEM=1    rehearsal only (root): hide this machine's copies of the bundled
#                              packages (overlay whiteouts in a private mount namespace) first
#   GPU_CHECK_CMAKE_ARGS="..." extra arguments for the configure phase (e.g. a compiler launcher)
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bundle=${GPU_BUNDLE_DIR:-$root/.gpu_bundle}
work=${GPU_CHECK_WORK:-$root/build-gpu-check}
OUT=${OUT:-$root/gpu_check_out}
arch=x86_64-linux-gnu
rehearsal=${GPU_CHECK_REHEARSAL:-0}
use_system=${GPU_CHECK_USE_SYSTEM:-0}
scale=${GPU_CHECK_PHASE_SCALE:-1}
budget=${GPU_CHECK_BUDGET_S:-510}
unpack_limit=60

# --- the plan: every phase after unpacking, in run order, most valuable first -------------------
# name, limit in seconds (before GPU_CHECK_PHASE_SCALE), what it proves.
plan=(
  "configure|20|CMake finds nvcc, NCCL and every dependency (-DZEROLAP_CUDA=ON)"
  "prefix_check|5|every dependency CMake found is the bundle's"
  "build|100|zerolap, zerolap_tests and zerolap_mpi_tests build (not the fuzz targets)"
  "cuda_units|30|[cuda]: fp32/TF32/bf16 GEMMs, element-wise, reductions, fused optimizers (remainders too), link kernels vs the CPU; [gpu-bandwidth]: fused Adam vs copy"
  "cuda_train|70|[cuda-train]: CUDA vs CPU training in every mode (stages 2 and 3 too), fp32 and bf16; the link's delay kernels; the compute-only twin's ordering; [device]"
  "bench|105|zerolap bench configs/bench_large.toml: fp32, tf32, bf16 x ddp, zero/interleaved/reduce_broadcast"
  "bench_link8|45|the bf16 rows again with link.ranks = 8 at a bandwidth where their modelled comm is 0.9x their compute"
  "bench_checks|5|scripts/bench_gpu_checks.py: each row against the bench's own model (ideal, predicted)"
  "nonfinite|20|the non-finite check on the device: stop, skip_step (a zero mode), train.max_loss"
  "torch_bf16|110|scripts/compare_torch.py in bf16 (PyTorch: autocast + fused AdamW): the bf16 goal"
)
if [[ "$use_system" == 1 ]]; then
  kept=()
  for p in "${plan[@]}"; do [[ $p == prefix_check\|* ]] || kept+=("$p"); done
  plan=("${kept[@]}")
fi
plan_sum=0
for p in "${plan[@]}"; do
  IFS='|' read -r _ limit _ <<<"$p"
  plan_sum=$((plan_sum + limit))
done
print_plan() {
  local i=0 name limit what
  printf '%-3s %-13s %6s  %s\n' "#" "phase" "limit" "proves"
  printf '%-3s %-13s %5ss  %s\n' "0" "unpack" "$([[ "$use_system" == 1 ]] && echo 0 || echo $((unpack_limit * scale)))" \
    "$([[ "$use_system" == 1 ]] && echo "(system packages: none)" || echo "the bundle's .debs into a private prefix (before the budget)")"
  for p in "${plan[@]}"; do
    IFS='|' read -r name limit what <<<"$p"
    i=$((i + 1))
    printf '%-3s %-13s %5ss  %s\n' "$i" "$name" "$((limit * scale))" "$what"
  done
  printf 'sum of the limits after unpacking: %d s; budget %d s%s: %s\n' "$((plan_sum * scale))" \
    "$((budget * scale))" "$([[ "$scale" != 1 ]] && echo " (GPU_CHECK_PHASE_SCALE=$scale)")" \
    "$( ((plan_sum <= budget)) && echo "within" || echo "EXCEEDED")"
}
limit_of() {  # NAME -> its limit, scaled
  local name limit
  for p in "${plan[@]}"; do
    IFS='|' read -r name limit _ <<<"$p"
    [[ $name == "$1" ]] && { echo $((limit * scale)); return; }
  done
  echo "gpu_check: internal error: no phase $1 in the plan" >&2
  exit 1
}
if [[ "${1:-}" == "--plan" ]]; then
  print_plan
  ((plan_sum <= budget)) || exit 2
  exit 0
fi
if [[ $# -gt 0 ]]; then
  echo "usage: scripts/gpu_check.sh [--plan]   (settings in the environment; see the header)" >&2
  exit 2
fi
if ((plan_sum > budget)); then
  print_plan >&2
  echo "gpu_check: the phases' limits add up to ${plan_sum} s, beyond GPU_CHECK_BUDGET_S = ${budget} s: not starting" >&2
  exit 2
fi

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

# --- bookkeeping: logs in $work/logs; $OUT gets the report and one archive after every phase ----
logs=$work/logs
rm -rf "$logs" "$work/results" && mkdir -p "$logs" "$work/results" "$OUT"
rm -f "$OUT/gpu_check.md" "$OUT/gpu_check_logs.tar.gz"
phases_tsv=$work/results/phases.tsv
: >"$phases_tsv"
failures=0
{
  echo "date $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "host $(hostname)"
  echo "commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')$([[ -n $(git -C "$root" status --porcelain 2>/dev/null) ]] && echo ' (+ local changes)')"
  echo "gpu $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -1 || true)"
  echo "nvcc $( (nvcc --version 2>/dev/null || /usr/local/cuda/bin/nvcc --version 2>/dev/null) | tail -1)"
  echo "cmake $(cmake --version 2>/dev/null | head -1)"
  echo "python $(python3 -c 'import sys; print(sys.version.split()[0])' 2>/dev/null)"
  echo "glibc $(ldd --version | head -1 | awk '{print $NF}'), $(nproc) CPUs"
  echo "dependencies $([[ "$use_system" == 1 ]] && echo "system packages" || echo "bundle unpacked in $work/prefix")"
  echo "rehearsal $rehearsal"
  echo "scale $scale"
  echo "budget $((budget * scale)) s, limits sum $((plan_sum * scale)) s"
} >"$work/results/machine.txt"

write_report() {
  python3 "$root/scripts/gpu_check_report.py" "$work/results" "$logs" >"$OUT/gpu_check.md" 2>"$logs/report.err" ||
    { echo "# zerolap GPU check"; echo; echo "the report failed:"; cat "$logs/report.err"; } >"$OUT/gpu_check.md"
  tar -czf "$OUT/gpu_check_logs.tar.gz" -C "$work" logs results 2>/dev/null
}

# phase NAME COMMAND...: runs COMMAND under the phase's limit (cut to what the budget has left),
# output in $logs/NAME.log; one row of phases.tsv; then the report and the archive are rewritten.
phase() {
  local name=$1 max rc status begin left
  shift
  if [[ $name == unpack ]]; then
    max=$((unpack_limit * scale))
  else
    max=$(limit_of "$name")
    left=$((deadline - SECONDS))
    ((max > left)) && max=$((left > 1 ? left : 1))
  fi
  echo "== $name (limit ${max} s)"
  begin=$SECONDS
  timeout --kill-after=5 "$max" "$@" >"$logs/$name.log" 2>&1
  rc=$?
  if ((rc == 0)); then status=ok
  elif ((rc == 124 || rc == 137)); then status="TIMEOUT after ${max} s"
  else status="FAILED (exit $rc)"
  fi
  # On a GPU machine a CUDA test that skipped for want of a device is a failure.
  if ((rc == 0)) && [[ "$rehearsal" != 1 ]] && grep -q "no CUDA device visible" "$logs/$name.log"; then
    status="FAILED (no CUDA device visible: the CUDA tests skipped)"
    rc=1
  fi
  ((rc == 0)) || failures=$((failures + 1))
  printf '%s\t%s\t%s\t%s\n' "$name" "$max" "$status" "$((SECONDS - begin))" >>"$phases_tsv"
  echo "   $status in $((SECONDS - begin)) s"
  write_report
  return $rc
}

# --- 0. the dependency prefix (before the budget) ---------------------------------------------
prefix=$work/prefix
unpack() {
  [[ -f "$bundle/SHA256SUMS" ]] || { echo "no bundle in $bundle: run scripts/gpu_bundle.sh"; return 1; }
  (cd "$bundle/debs" && sha256sum --quiet -c ../SHA256SUMS) || return 1
  rm -rf "${prefix:?}" && mkdir -p "$prefix"
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
    cp -a "$prefix/lib/." "$prefix/usr/lib/" && rm -rf "${prefix:?}/lib" && ln -s usr/lib "$prefix/lib"
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
  phase unpack bash -c "$(declare -f unpack); prefix='$prefix' bundle='$bundle' arch='$arch' unpack" ||
    echo "gpu_check: unpacking failed (see the unpack log)"
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
# The budget starts after unpacking. The limits fit in it; the deadline also absorbs the phases'
# kill grace periods, so the run ends within unpacking + budget + one grace period.
deadline=$((SECONDS + budget * scale))
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
mpirun_1=(mpirun -np 1 --bind-to none --mca btl self,vader)

# --- 1-3. configure, check the prefix, build ----------------------------------------------------
build=$work/build
read -r -a extra_cmake <<<"${GPU_CHECK_CMAKE_ARGS:-}"
phase configure cmake -S "$root" -B "$build" -DZEROLAP_CUDA=ON -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" "${cmake_hints[@]}" "${extra_cmake[@]}"
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
  phase prefix_check bash -c "$(declare -f check_prefix); build='$build' prefix='$prefix' check_prefix"
fi
phase build cmake --build "$build" -j "$(nproc)" --target zerolap zerolap_tests zerolap_mpi_tests

# --- 4-5. the CUDA tests (they skip, with a WARN, where no GPU is visible) ----------------------
catch=(--use-colour no)
phase cuda_units "$build/tests/zerolap_tests" "[cuda],[gpu-bandwidth]" "${catch[@]}"
phase cuda_train "${mpirun_1[@]}" "$build/tests/zerolap_mpi_tests" "[cuda-train],[device]" "${catch[@]}"

# --- 6-8. the bench, without and with a modelled 8-rank link, and its checks --------------------
device=cuda
small=()  # the rehearsal's CPU-sized model: the same commands, a CPU can run them
if [[ "$rehearsal" == 1 ]]; then
  device=cpu
  small=(--set 'model.widths=[256, 256, 256, 256]' --set data.batch_size=32
    --set data.train_samples=2048 --set data.test_samples=64 --set runtime.threads=1)
fi
best_zero=zero/interleaved/reduce_broadcast
bench_args=(bench "$root/configs/bench_large.toml" --set runtime.device=$device
  --set 'bench.precision=["fp32", "tf32", "bf16"]' --set 'bench.bucket_cap_mb=[25.0]'
  --set bench.warmup=3 --set bench.steps=10 --set "bench.modes=[\"ddp\", \"$best_zero\"]"
  "${small[@]}")
results=$work/results
phase bench "${mpirun_1[@]}" "$build/zerolap" "${bench_args[@]}" --set output.dir="\"$results/bench\""
# The bandwidth at which bf16's modelled reduce + broadcast take 0.9x its compute-only step.
link_gbps=$(python3 "$root/scripts/bench_gpu_checks.py" link-bandwidth "$results/bench/bench.json" \
  --precision bf16 --mode "$best_zero" --ratio 0.9 2>>"$logs/bench.log")
echo "${link_gbps:-none}" >"$results/link_gbps.txt"
phase bench_link8 "${mpirun_1[@]}" "$build/zerolap" "${bench_args[@]}" --set link.ranks=8 \
  --set 'bench.precision=["bf16"]' \
  --set link.bandwidth_gbps="${link_gbps:-400}" --set output.dir="\"$results/bench_link8\""
phase bench_checks python3 "$root/scripts/bench_gpu_checks.py" report "$results/bench/bench.json" \
  "$results/bench_link8/bench.json" --device $device \
  --timing "$([[ "$rehearsal" == 1 ]] && echo report || echo enforce)"

# --- 9. the non-finite check on the device -------------------------------------------------------
nonfinite() {
  local cfg=$work/nonfinite.toml rc out
  cat >"$cfg" <<TOML
[model]
kind = "mlp"
widths = [8, 32, 4]
seed = 3
[data]
kind = "teacher"
teacher_task = "classification"
teacher_hidden = 16
train_samples = 512
test_samples = 64
batch_size = 8
seed = 5
[optimizer]
kind = "sgd"
lr = 0.05
[train]
steps = 20
log_every = 1
[runtime]
timeout_s = 60
device = "$device"
[output]
dir = "$work/runs/nonfinite"
TOML
  # case NAME EXPECTED_RC PATTERN ENV_AND_ARGS...: one run and what it must say.
  run_case() {
    local name=$1 want=$2 pattern=$3
    shift 3
    # A directory of its own per case: a run's output.dir belongs to that run (docs/checkpoints.md).
    out=$("${mpirun_1[@]}" "$@" --set "output.dir=\"$work/runs/nonfinite_$name\"" 2>&1)
    rc=$?
    if ((rc != want)) || ! grep -qE -- "$pattern" <<<"$out"; then
      echo "FAIL $name: exit $rc (want $want), want /$pattern/ in:"
      tail -n 15 <<<"$out"
      return 1
    fi
    echo "ok   $name: exit $rc, $(grep -oE -- "$pattern" <<<"$out" | head -1)"
  }
  local bad=0
  # On CUDA "stop" without clipping checks once per log window (log_every = 1: each step).
  local window="( \\(checked once per log window on CUDA\\))?"
  # The window check names the loss, or, when it stayed finite, the parameters.
  local what="the (training loss is|parameters are) not finite"
  run_case stop 1 "diverged at step [0-9]+$window: $what" \
    "$build/zerolap" train "$cfg" --set optimizer.lr=1e10 || bad=1
  # Stage 3 on the device checks once per log window, summing each rank's parameter shards.
  run_case stop_stage3 1 "diverged at step [0-9]+$window: $what" \
    "$build/zerolap" train "$cfg" --set optimizer.lr=1e10 --set parallel.mode=\"zero\" \
    --set parallel.collective=\"reduce_scatter_allgather\" --set parallel.zero_stage=3 || bad=1
  # In a zero mode: the skipped step's publishes are left out of the collective program too.
  run_case skip_step 0 "skipped step 3: the training loss is not finite" \
    -x ZEROLAP_FAULT_NONFINITE=3:0 "$build/zerolap" train "$cfg" \
    --set train.on_nonfinite=\"skip_step\" --set train.steps=6 --set parallel.mode=\"zero\" \
    --set parallel.overlap=\"after_backward\" || bad=1
  run_case max_loss 1 "diverged at step [0-9]+: the training loss is above train.max_loss" \
    "$build/zerolap" train "$cfg" --set optimizer.kind=\"adam\" --set optimizer.lr=1e10 \
    --set train.max_loss=1e6 || bad=1
  return $bad
}
phase nonfinite bash -c "$(declare -f nonfinite); work='$work' build='$build' device='$device' \
  mpirun_1=(${mpirun_1[*]}); nonfinite"

# --- 10. zerolap against PyTorch (scripts/compare_torch.py; PyTorch with CUDA) ----------------
# 1 rank, one cap, ddp and the best zero mode against PyTorch's four modes, few steps.
torch_args=("$root/configs/bench_large.toml" --device $device --world 1 --zerolap "$build/zerolap"
  --set 'bench.bucket_cap_mb=[25.0]' --set bench.warmup=3 --set bench.steps=10
  --set "bench.modes=[\"ddp\", \"$best_zero\"]" "${small[@]}")
torch_phase() {  # PRECISION
  if [[ "$rehearsal" == 1 ]] && ! python3 -c "import torch" 2>/dev/null; then
    # No PyTorch on this machine: the command runs to its import and must say so (exit 2).
    python3 "$root/scripts/compare_torch.py" "${torch_args[@]}" --set precision.compute="$1"
    local rc=$?
    echo "rehearsal: no PyTorch here; compare_torch.py exited $rc before any run (2 expected)"
    return $((rc == 2 ? 0 : 1))
  fi
  python3 "$root/scripts/compare_torch.py" "${torch_args[@]}" --set precision.compute="$1"
}
for precision in bf16; do  # fp32 by hand: compare_torch.py ... --set precision.compute=fp32
  phase "torch_$precision" bash -c "$(declare -f torch_phase); root='$root' rehearsal='$rehearsal' \
    torch_args=($(printf '%q ' "${torch_args[@]}")); torch_phase $precision"
done

[[ -f "$logs/build.log" ]] && tail -n 300 "$logs/build.log" >"$logs/build.tail.log" &&
  rm "$logs/build.log" && write_report
echo "gpu_check: $failures failed phase(s); report: $OUT/gpu_check.md, logs: $OUT/gpu_check_logs.tar.gz"
((failures == 0))
