#!/usr/bin/env bash
# scripts/compare_torch.py launches zerolap under `mpirun -np N` at every world size, 1 included (a
# singleton without a launcher may never finish under a relocated Open MPI): its run_zerolap, with
# an mpirun shim first on PATH that records its arguments, runs a tiny 1-rank bench and reads its
# JSON, timed in one round whatever the config's bench.rounds. Needs no PyTorch (the script imports it only in main). Prints PASS or FAIL.
# Usage: compare_torch_launch_test.sh ZEROLAP_BINARY SOURCE_DIR WORK_DIR
set -u
zerolap=$1
src=$2
work=$3
rm -rf "$work" && mkdir -p "$work/bin"
fail() { echo "FAIL: $*"; exit 1; }
real_mpirun=$(command -v mpirun) || fail "no mpirun on PATH"
cat >"$work/bin/mpirun" <<SH
#!/bin/sh
echo "\$*" >>"$work/mpirun.log"
exec "$real_mpirun" "\$@"
SH
chmod +x "$work/bin/mpirun"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
PATH="$work/bin:$PATH" python3 - "$src" "$zerolap" "$work" <<'PY' || fail "run_zerolap at world 1"
import sys
src, zerolap, work = sys.argv[1:]
sys.path.insert(0, src + "/scripts")
import compare_torch
# A config that asks for three bench rounds: the comparison still times one, as PyTorch's side.
config = work + "/spirals_rounds.toml"
with open(src + "/configs/spirals.toml") as f, open(config, "w") as out:
    out.write(f.read() + "\n[bench]\nrounds = 3\n")
report = compare_torch.run_zerolap(
    zerolap, config,
    ["bench.warmup=1", "bench.steps=2", 'bench.modes=["ddp"]', "runtime.threads=1"], 1, "cpu",
    work, "launch")
assert report["command"].startswith("mpirun -np 1 --bind-to none "), report["command"]
assert report["world_size"] == 1 and len(report["results"]) == 1, report
assert report["rounds"] == 1 and len(report["results"][0]["step_times_s"]) == 2, report
print("command:", report["command"])
PY
grep -q "^-np 1 --bind-to none .*zerolap bench " "$work/mpirun.log" ||
  { cat "$work/mpirun.log"; fail "mpirun was not called with -np 1"; }
echo PASS
