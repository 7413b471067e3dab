#!/usr/bin/env python3
"""zerolap against PyTorch on the same model, batch per rank and optimizer, timed the same way.

    scripts/compare_torch.py CONFIG [--world N[,M...]] [--device cpu|cuda] [--set key=value ...]

For each world size it trains CONFIG's model in PyTorch, in CONFIG's precision.compute (fp32;
tf32: TF32 matmuls on CUDA; bf16: autocast to bf16 with fp32 parameters and optimizer) and with
the fused Adam/AdamW kernel on CUDA where PyTorch has one, under DistributedDataParallel with
  ddp                              the config's optimizer, stepped after backward
  ZeroRedundancyOptimizer          the same optimizer, sharded (step after backward)
  hook_with_zero_step              ZeRO step overlapped with DDP's bucket all-reduces
  hook_with_zero_step_interleaved  (both hooks need NCCL: on gloo PyTorch refuses them, and the
                                   table says so; they step an unfused optimizer)
at every bench.bucket_cap_mb, then runs `zerolap bench CONFIG` at the same world size and prints
one table: per mode the median, p10 and p90 of the step time (bench.warmup untimed steps, then
bench.steps timed ones; a step's time is the slowest rank's, as `zerolap bench` reports it) and
each mode's ratio to PyTorch's best. Each rank of both gets runtime.threads threads ("auto", the
default: the machine's CPUs shared among the ranks). Two or more world sizes add a weak-scaling
line (batch and threads per rank fixed: efficiency = t(smallest world) / t(world); where "auto"
gives the smallest world more threads per rank, it runs once more with the larger world's).

PyTorch is not a dependency of zerolap: without it the script exits 2 and says how to install it.
Exit codes: 0 done, 2 bad input (no PyTorch, bad config or arguments), 1 a run failed.
"""

import argparse
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import time

try:
    import tomllib
except ImportError:  # Python < 3.11
    tomllib = None

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INSTALL_HINT = (
    "compare_torch: PyTorch is not installed for {python} (it is not a dependency of zerolap). "
    "Install it to compare: on Debian 12 `apt-get install python3-torch` (then run this script "
    "with /usr/bin/python3), or `pip install torch`; GPU runs need a CUDA build of PyTorch."
)
HOOK_MODES = ("hook_with_zero_step", "hook_with_zero_step_interleaved")
TORCH_MODES = ("ddp", "ZeroRedundancyOptimizer") + HOOK_MODES


def fail(message, code=2):
    print(f"compare_torch: {message}", file=sys.stderr)
    sys.exit(code)


# --- the config (only the keys that shape the model, batch, optimizer and timing) ----------------

def parse_override(text):
    """--set section.key=value, the value read as TOML as zerolap does (a bare word: a string)."""
    if "=" not in text or "." not in text.split("=", 1)[0]:
        fail(f"--set {text}: expected section.key=value")
    key, raw = text.split("=", 1)
    section, name = key.split(".", 1)
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw
    return section, name, value


def load_config(path, overrides):
    if tomllib is None:
        fail("needs Python >= 3.11 (tomllib) to read the config")
    try:
        with open(path, "rb") as f:
            config = tomllib.load(f)
    except OSError as e:
        fail(f"{path}: {e.strerror}")
    except tomllib.TOMLDecodeError as e:
        fail(f"{path}: {e}")
    for text in overrides:
        section, name, value = parse_override(text)
        config.setdefault(section, {})[name] = value
    return config


def get(config, section, key, default):
    return config.get(section, {}).get(key, default)


# --- the model, as models/model.cpp builds it -----------------------------------------------------

def build_model(torch, config):
    nn = torch.nn
    widths = get(config, "model", "widths", None)
    if not widths or len(widths) < 2:
        fail("model.widths: needs [in, ..., out]")
    kind = get(config, "model", "kind", "mlp")
    activation = get(config, "model", "activation", "relu")
    eps = get(config, "model", "layernorm_eps", 1e-5)

    def act():
        return {"relu": nn.ReLU, "tanh": nn.Tanh, "identity": nn.Identity,
                "gelu": lambda: nn.GELU(approximate="tanh")}[activation]()

    if kind == "mlp":
        layers = []
        for i in range(len(widths) - 1):
            layers.append(nn.Linear(widths[i], widths[i + 1]))
            if i + 2 < len(widths):
                layers.append(act())
        return nn.Sequential(*layers)
    if kind != "residual_mlp":
        fail(f"model.kind = {kind!r}: the comparison knows mlp and residual_mlp")

    class Block(nn.Module):  # x + fc2(act(fc1(LN(x))))
        def __init__(self, d):
            super().__init__()
            self.norm = nn.LayerNorm(d, eps=eps)
            self.fc1 = nn.Linear(d, d)
            self.act = act()
            self.fc2 = nn.Linear(d, d)

        def forward(self, x):
            return x + self.fc2(self.act(self.fc1(self.norm(x))))

    d = widths[1]
    return nn.Sequential(nn.Linear(widths[0], d), *[Block(d) for _ in widths[2:-1]],
                         nn.LayerNorm(d, eps=eps), nn.Linear(d, widths[-1]))


PRECISIONS = ("fp32", "tf32", "bf16")


def precision_of(config):
    """precision.compute, as zerolap reads it: fp32 (default), tf32 or bf16."""
    compute = get(config, "precision", "compute", "fp32")
    if compute not in PRECISIONS:
        fail(f"precision.compute = {compute!r}: expected one of {', '.join(PRECISIONS)}")
    return compute


def optimizer_class_and_args(torch, config, device_kind):
    """The config's optimizer in PyTorch, at its fastest: Adam/AdamW on CUDA use the fused
    (single-kernel) implementation where this PyTorch has one, as zerolap's step is fused."""
    import inspect
    o = config.get("optimizer", {})
    kind = o.get("kind", "adam")
    lr = o.get("lr", 1e-3)
    wd = o.get("weight_decay", 0.0)
    if kind in ("adam", "adamw"):
        cls = torch.optim.Adam if kind == "adam" else torch.optim.AdamW
        args = dict(lr=lr, betas=tuple(o.get("betas", [0.9, 0.999])), eps=o.get("eps", 1e-8),
                    weight_decay=wd)
        if device_kind == "cuda" and "fused" in inspect.signature(cls).parameters:
            args["fused"] = True
        return cls, args
    if kind == "sgd":
        return torch.optim.SGD, dict(lr=lr, momentum=o.get("momentum", 0.0),
                                     dampening=o.get("dampening", 0.0), weight_decay=wd,
                                     nesterov=o.get("nesterov", False))
    fail(f"optimizer.kind = {kind!r}: unknown")


# --- one PyTorch rank -----------------------------------------------------------------------------

def percentile(values, p):
    """As runtime/bench/bench.cpp: linear interpolation between the sorted values."""
    v = sorted(values)
    pos = p * (len(v) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def torch_rank(rank, world, port, config, device_kind, result_path, intra_op_threads):
    import torch
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.distributed.algorithms.ddp_comm_hooks import ddp_zero_hook
    from torch.distributed.optim import ZeroRedundancyOptimizer
    from torch.nn.parallel import DistributedDataParallel as DDP

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    backend = "nccl" if device_kind == "cuda" else "gloo"
    dist.init_process_group(backend, rank=rank, world_size=world)
    # PyTorch's intra-op pool (run_torch says how many); its BLAS pool was pinned by the parent
    # (pin_blas_threads), and the report records what this process saw.
    torch.set_num_threads(intra_op_threads)
    if device_kind == "cuda":
        torch.cuda.set_device(rank % torch.cuda.device_count())
        device = torch.device("cuda", torch.cuda.current_device())
    else:
        device = torch.device("cpu")

    widths = config["model"]["widths"]
    batch = int(get(config, "data", "batch_size", 64))
    regression = (get(config, "data", "kind", "fashion_mnist") == "teacher" and
                  get(config, "data", "teacher_task", "regression") == "regression")
    warmup = int(get(config, "bench", "warmup", 5))
    steps = int(get(config, "bench", "steps", 30))
    caps = get(config, "bench", "bucket_cap_mb", get(config, "parallel", "bucket_cap_mb", 25.0))
    caps = caps if isinstance(caps, list) else [caps]
    opt_cls, opt_args = optimizer_class_and_args(torch, config, device_kind)
    # precision.compute as PyTorch users run it: tf32 lets cuBLAS use TF32 tensor cores for fp32
    # matmuls; bf16 is autocast (bf16 matmuls, fp32 parameters, gradients and optimizer), the
    # usual mixed-precision recipe. On the CPU tf32 changes nothing, as in zerolap.
    precision = precision_of(config)
    if device_kind == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    autocast_bf16 = precision == "bf16"

    gen = torch.Generator().manual_seed(1234 + rank)
    x = torch.randn(batch, widths[0], generator=gen).to(device)
    y = (torch.randn(batch, widths[-1], generator=gen) if regression
         else torch.randint(0, widths[-1], (batch,), generator=gen)).to(device)
    loss_fn = torch.nn.MSELoss() if regression else torch.nn.CrossEntropyLoss()

    def sync():
        if device_kind == "cuda":
            torch.cuda.synchronize()

    results = []
    for mode in TORCH_MODES:
        for cap in caps:
            torch.manual_seed(int(get(config, "model", "seed", 0)))
            model = build_model(torch, config).to(device)
            ddp = DDP(model, device_ids=[device.index] if device_kind == "cuda" else None,
                      bucket_cap_mb=float(cap), gradient_as_bucket_view=True)
            step_after_backward = None
            row = dict(mode=mode, bucket_cap_mb=cap)
            try:
                if mode == "ddp":
                    step_after_backward = opt_cls(ddp.parameters(), **opt_args)
                elif mode == "ZeroRedundancyOptimizer":
                    step_after_backward = ZeroRedundancyOptimizer(
                        ddp.parameters(), optimizer_class=opt_cls, **opt_args)
                else:
                    # The hooks step PyTorch's functional optimizer, whose fused kernel fails on
                    # step counts it keeps on the CPU (PyTorch 2.11 on an H200: "state_steps is
                    # on cpu"): these modes run the unfused kernel.
                    hook_args = {k: v for k, v in opt_args.items() if k != "fused"}
                    zero = ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=opt_cls,
                                                   overlap_with_ddp=True, **hook_args)
                    hook = getattr(ddp_zero_hook, mode)
                    ddp.register_comm_hook(None, hook(default_hooks.allreduce_hook, ddp, zero))
            except (RuntimeError, ValueError) as e:  # gloo: "... requires NCCL/HCCL ..."
                row["refused"] = " ".join(str(e).split())
                results.append(row)
                continue
            # The overlap hooks skip the optimizer in the first 2 iterations while DDP settles its
            # buckets: warm up past them.
            mode_warmup = max(warmup, 3) if mode in HOOK_MODES else warmup
            times = []
            for i in range(mode_warmup + steps):
                sync()
                start = time.perf_counter()
                with torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast_bf16):
                    loss = loss_fn(ddp(x), y)
                loss.backward()
                if step_after_backward is not None:
                    step_after_backward.step()
                    step_after_backward.zero_grad(set_to_none=False)
                else:
                    ddp.zero_grad(set_to_none=False)
                sync()
                if i >= mode_warmup:
                    times.append(time.perf_counter() - start)
            # A step's time is the slowest rank's, as zerolap bench reports it.
            t = torch.tensor(times, dtype=torch.float64, device=device)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            times = t.cpu().tolist()
            row.update(median_s=percentile(times, 0.5), p10_s=percentile(times, 0.1),
                       p90_s=percentile(times, 0.9), mean_s=sum(times) / len(times))
            results.append(row)
            del ddp, model, step_after_backward
            dist.barrier()
    if rank == 0:
        with open(result_path, "w") as f:
            json.dump(dict(torch=torch.__version__, backend=backend, results=results,
                           precision=precision, fused=bool(opt_args.get("fused")),
                           intra_op_threads=torch.get_num_threads(),
                           blas_threads=os.environ.get("OPENBLAS_NUM_THREADS")), f)
    dist.destroy_process_group()


def threads_per_rank(config, world):
    """runtime.threads as zerolap resolves it for `world` unbound ranks on this node: an integer
    as given; "auto" (the default) the CPUs this process may run on, shared among the ranks
    (World::cpus_per_rank). zerolap's bench reports what it used (cpu_threads), and the table
    header shows both."""
    threads = get(config, "runtime", "threads", "auto")
    if threads == "auto":
        return max(1, len(os.sched_getaffinity(0)) // world)
    return int(threads)


def pin_blas_threads(threads):
    """Give PyTorch the cores zerolap gets: `threads` per rank.

    torch.set_num_threads bounds PyTorch's own (OpenMP) pool only. A PyTorch that multiplies
    through a pthreads OpenBLAS (Debian's python3-torch) also runs OpenBLAS's pool, one thread per
    core by default, so "1 thread" PyTorch used every core while zerolap used one: at 1 rank on
    2 cores its GEMMs ran about 2x faster than a fair comparison allows. The pools read these
    variables when the library loads, so they are set here, before mp.spawn starts the ranks.
    """
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[name] = str(threads)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_torch_once(config, world, threads, intra_op_threads, device_kind, workdir):
    import torch.multiprocessing as mp
    result_path = os.path.join(workdir, f"torch_{world}_{threads}_{intra_op_threads}.json")
    pin_blas_threads(threads)
    mp.spawn(torch_rank, args=(world, free_port(), config, device_kind, result_path,
                               intra_op_threads),
             nprocs=world, join=True)
    with open(result_path) as f:
        return json.load(f)


def run_torch(config, world, threads, device_kind, workdir):
    """PyTorch at `threads` threads per rank, in its faster thread layout per mode.

    With a BLAS that keeps its own thread pool (Debian's pthreads OpenBLAS), an intra-op pool of
    `threads` OpenMP threads spins beside the BLAS threads on the same cores: at 1 rank on 2 cores
    PyTorch took 45-59 ms per step that way, and 31 ms with an intra-op pool of 1 (its GEMMs on
    `threads` BLAS threads). With more than one thread per rank on the CPU, both layouts run, and
    every mode keeps both rows (the second marked "intra-op 1"); the best row is PyTorch's best.
    """
    report = run_torch_once(config, world, threads, threads, device_kind, workdir)
    if device_kind == "cpu" and threads > 1:
        single = run_torch_once(config, world, threads, 1, device_kind, workdir)
        report["results"] += [dict(row, mode=f"{row['mode']} [intra-op 1]")
                              for row in single["results"] if "median_s" in row]
        report["intra_op_threads"] = f"{report['intra_op_threads']} and 1"
    return report


# --- zerolap bench ---------------------------------------------------------------------------------

# PyTorch's GEMM below this share of zerolap's at the config's shapes means its BLAS is not an
# optimized one (Debian's python3-torch with only the reference libblas3 ran 6 GFLOP/s): the
# comparison would measure that BLAS, not the frameworks, so it is refused.
SLOW_BLAS_SHARE = 0.2
BLAS_HINT = ("install an optimized BLAS for PyTorch: on Debian 12 `apt-get install "
             "libopenblas0-pthread` (python3-torch then uses it in place of the reference "
             "libblas3), then rerun")


def gemm_rate(shapes):
    """GFLOP/s over one step's GEMMs: [(m, n, k, count, gflops)] -> total FLOPs / total time."""
    flops = sum(2.0 * m * n * k * count for m, n, k, count, _ in shapes)
    seconds = sum(2.0 * m * n * k * count / (g * 1e9) for m, n, k, count, g in shapes if g > 0)
    return flops / seconds / 1e9 if seconds > 0 else 0.0


def torch_gemm_shapes(torch, zl_shapes, threads, repeats=20, windows=3):
    """PyTorch's fp32 matmul at each of zerolap's GEMM shapes, on `threads` threads: the fastest
    of `windows` timed windows, so that another process running for a moment on a busy machine
    does not make an optimized BLAS look like the reference one (a slow BLAS is slow in all)."""
    torch.set_num_threads(threads)
    out = []
    for m, n, k, count, _ in zl_shapes:
        a, b = torch.randn(m, k), torch.randn(k, n)
        torch.mm(a, b)  # warm-up: first-call dispatch and allocation
        seconds = float("inf")
        for _ in range(windows):
            start = time.perf_counter()
            for _ in range(repeats):
                torch.mm(a, b)
            seconds = min(seconds, (time.perf_counter() - start) / repeats)
        out.append((m, n, k, count, 2.0 * m * n * k / seconds / 1e9))
    return out


def check_gemm_rates(torch_gflops, zerolap_gflops, threads):
    """Prints both sides' GEMM rate; exits 2 naming the package when PyTorch's BLAS is far slower."""
    print(packed([f"GEMM at the config's shapes, {threads} thread(s), fp32:",
                  f"PyTorch {torch_gflops:.1f} GFLOP/s, zerolap {zerolap_gflops:.1f} GFLOP/s"]))
    if zerolap_gflops > 0 and torch_gflops < SLOW_BLAS_SHARE * zerolap_gflops:
        fail(f"PyTorch's GEMM runs at {torch_gflops:.1f} GFLOP/s, under {SLOW_BLAS_SHARE:g}x "
             f"zerolap's {zerolap_gflops:.1f} GFLOP/s: its BLAS is not an optimized one, and the "
             f"comparison would measure that BLAS; {BLAS_HINT}")


def zerolap_gemm_shapes(zl_report):
    """The fp32 GEMM limits of a bench.json: [(m, n, k, count, gflops)]."""
    for p in zl_report.get("limits", {}).get("precisions", []):
        if p.get("precision") in ("fp32", "tf32"):
            return [(g["m"], g["n"], g["k"], g["count"], g["gflops"]) for g in p.get("gemm", [])]
    return []


def run_zerolap(binary, config_path, overrides, world, device_kind, workdir, tag):
    out_dir = os.path.join(workdir, f"zerolap_{world}_{tag}")
    # One round (bench.rounds): the PyTorch side times its modes once each too.
    cmd = [binary, "bench", config_path, "--set", f'output.dir="{out_dir}"',
           "--set", f"runtime.device={device_kind}", "--set", "bench.rounds=1"]
    for o in overrides:
        cmd += ["--set", o]
    # mpirun at every world size: a singleton (no launcher) is a path a relocated Open MPI may
    # never finish (scripts/gpu_check.sh runs the bundle's).
    cmd = ["mpirun", "-np", str(world), "--bind-to", "none"] + cmd
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-3000:])
        fail(f"`{' '.join(cmd)}` exited {proc.returncode}", 2 if proc.returncode == 2 else 1)
    with open(os.path.join(out_dir, "bench.json")) as f:
        report = json.load(f)
    report["command"] = " ".join(cmd)
    return report


# --- the table -------------------------------------------------------------------------------------

WIDTH = 100  # every line of the report fits a 100-column terminal (tested)


def wrapped(text, indent="    "):
    """`text` in lines of at most WIDTH columns, the later ones indented; a word longer than a
    line (a path) is broken."""
    return "\n".join(textwrap.wrap(text, WIDTH, subsequent_indent=indent, break_long_words=True,
                                    break_on_hyphens=False))


def packed(items, indent="    "):
    """`items` joined by spaces in lines of at most WIDTH columns, the later ones indented. An item
    is a figure with its label ("batch 64 per rank,") and is never split, so a reader finds each
    figure whole on one line; only an item longer than a line by itself (a path) is broken."""
    lines = []
    for item in items:
        if lines and len(lines[-1]) + 1 + len(item) <= WIDTH:
            lines[-1] += " " + item
        else:
            lines.append((indent if lines else "") + item)
    return "\n".join(wrapped(line, indent) if len(line) > WIDTH else line for line in lines)


def best(rows):
    timed = [r for r in rows if "median_s" in r]
    return min(timed, key=lambda r: r["median_s"]) if timed else None


def table_rows(name, rows, torch_best, batch, world):
    """(framework, mode, cells) per timed row; cells: cap, median ms, p10-p90 ms, samples/s, ratio."""
    out = []
    for r in rows:
        if "refused" in r:
            continue
        ratio = r["median_s"] / torch_best["median_s"] if torch_best else float("nan")
        out.append((name, r["mode"], [f"{r['bucket_cap_mb']:g}", f"{r['median_s'] * 1e3:.2f}",
                                      f"{r['p10_s'] * 1e3:.2f}-{r['p90_s'] * 1e3:.2f}",
                                      f"{batch * world / r['median_s']:.0f}", f"{ratio:.2f}x"]))
    return out


TABLE_HEADER = ("cap", "median", "p10-p90", "samples/s", "/ torch")  # the mode's: times in ms


def print_table(torch_rows, zl_rows, torch_best, batch, world, backend):
    """One row per framework and mode, columns as wide as their widest cell. A row is never
    wrapped: where a mode is too long for the line, it goes on a line of its own above its row."""
    rows = table_rows("PyTorch", torch_rows, torch_best, batch, world) + \
        table_rows("zerolap", zl_rows, torch_best, batch, world)
    widths = [max([len(h)] + [len(cells[i]) for _, _, cells in rows])
              for i, h in enumerate(TABLE_HEADER)]
    figures = sum(w + 1 for w in widths)
    modes = [r["mode"] for r in torch_rows + zl_rows] + ["mode (step times in ms)"]
    mode_width = min(max(len(m) for m in modes), WIDTH - 8 - figures)

    def line(name, mode, cells):
        return f"{name:7} {mode:<{mode_width}} " + " ".join(
            f"{c:>{w}}" for c, w in zip(cells, widths))

    print(line("", "mode (step times in ms)"[:mode_width], TABLE_HEADER))
    refused = set()
    for name, rs in (("PyTorch", torch_rows), ("zerolap", zl_rows)):
        for r in rs:
            if "refused" not in r or r["mode"] in refused:  # once per mode: the cap does not matter
                continue
            refused.add(r["mode"])
            print(packed([f"{name:7} {r['mode']:<{mode_width}}", f"{'-':>{widths[0]}}",
                          f"refused on {backend}:"] + r["refused"][:150].split(),
                         indent=" " * 8))
    for name, mode, cells in rows:
        if len(mode) > mode_width:
            print(f"{name:7} {mode}")
            mode = "(above)"
        print(line(name, mode, cells))


def print_world(world, torch_report, zl_report, config, device_kind, purpose=""):
    torch_rows = torch_report["results"]
    precision = precision_of(config)
    # A bench that sweeps precisions reports a row per precision: compare PyTorch's like with like.
    zl_rows = [dict(mode=r["mode"], bucket_cap_mb=r["bucket_cap_mb"], median_s=r["step_median_s"],
                    p10_s=r["step_p10_s"], p90_s=r["step_p90_s"]) for r in zl_report["results"]
               if r.get("precision", precision) == precision]
    torch_best, zl_best = best(torch_rows), best(zl_rows)
    batch = int(get(config, "data", "batch_size", 64))
    print()
    print(packed([f"{world} rank(s){purpose},", f"{device_kind},", f"batch {batch} per rank,",
                  f"{get(config, 'optimizer', 'kind', 'adam')}"]))
    fused = ", fused optimizer" if torch_report["fused"] else ""
    autocast = " autocast" if torch_report["precision"] == "bf16" else ""
    print(packed([f"  PyTorch {torch_report['torch']}",
                  f"({torch_report['backend']}, {torch_report['precision']}{autocast}{fused},",
                  f"threads: intra-op {torch_report['intra_op_threads']},",
                  f"BLAS {torch_report['blas_threads']})"]))
    print(f"  zerolap (GEMM threads per rank: {zl_report.get('cpu_threads', '?')})")
    print(wrapped(f"  command: {zl_report['command']}", indent="      "))
    if device_kind == "cpu" and str(zl_report.get("cpu_threads")) != torch_report["blas_threads"]:
        print(packed(["warning:", f"zerolap ran {zl_report.get('cpu_threads')} GEMM threads per rank",
                      f"and PyTorch {torch_report['blas_threads']}:", "not like for like",
                      "(set runtime.threads)"]))
    if zl_report.get("simulated_link"):
        print(wrapped(f"note: zerolap ran on a simulated link ({zl_report['simulated_link']}); "
                      "PyTorch on the real one"))
    print_table(torch_rows, zl_rows, torch_best, batch, world, torch_report["backend"])
    if torch_best and zl_best:
        # The line holds only the figures it exists for; the modes follow on lines of their own.
        print(f"best: zerolap {zl_best['median_s'] * 1e3:.2f} ms vs PyTorch "
              f"{torch_best['median_s'] * 1e3:.2f} ms: "
              f"{zl_best['median_s'] / torch_best['median_s']:.2f}x")
        for name, r in (("zerolap", zl_best), ("PyTorch", torch_best)):
            print(packed([f"  {name}'s best: {r['mode']}", f"(cap {r['bucket_cap_mb']:g})"],
                         indent="      "))
    return torch_best, zl_best


def print_header(config_path, config, worlds):
    """The report's first lines: the config, the timing, the threads per rank."""
    print(wrapped(f"compare_torch: {config_path}"))  # a long path is broken, continued indented
    print(packed([f"{get(config, 'bench', 'warmup', 5)} warm-up +",
                  f"{get(config, 'bench', 'steps', 30)} timed steps per mode",
                  "(hooks: >= 3 warm-up);", "step time = the slowest rank's;",
                  "medians, p10-p90"]))
    per_world = [f"{threads_per_rank(config, w)} at {w} rank(s)" for w in worlds]
    print(packed([f"threads per rank: runtime.threads = {get(config, 'runtime', 'threads', 'auto')}"]
                 + [f"({t})" if len(per_world) == 1 else
                    f"({t}," if i == 0 else f"{t})" if i + 1 == len(per_world) else f"{t},"
                    for i, t in enumerate(per_world)]
                 + ["for zerolap's GEMMs", "and for PyTorch's intra-op and BLAS pools",
                    "(OPENBLAS_NUM_THREADS,", "OMP_NUM_THREADS,", "MKL_NUM_THREADS)"]))


def weak_scaling_line(base_world, world, threads, base, now):
    """t(base_world) / t(world) of the best modes, batch and threads per rank fixed: the
    percentages on the first line, what they are on the next."""
    (base_torch, base_zl), (t, z) = base, now
    return (f"weak scaling {base_world} -> {world} ranks at {threads} thread(s) per rank: zerolap "
            f"{base_zl['median_s'] / z['median_s'] * 100:.0f}%, PyTorch "
            f"{base_torch['median_s'] / t['median_s'] * 100:.0f}%\n"
            f"    (t{base_world} / t{world} of the best modes)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("config", help="a zerolap TOML config")
    parser.add_argument("--world", default="1",
                        help="ranks, or a comma-separated list for weak scaling (e.g. 1,2)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="a config override, passed to both sides")
    parser.add_argument("--zerolap", default=os.path.join(ROOT, "build", "zerolap"),
                        help="the zerolap binary (default: build/zerolap)")
    args = parser.parse_args()
    try:
        worlds = [int(w) for w in args.world.split(",")]
    except ValueError:
        fail(f"--world {args.world}: expected N or a list N,M,...")
    if any(w < 1 for w in worlds):
        fail(f"--world {args.world}: every world size must be >= 1")

    try:
        import torch
        import torch.distributed  # noqa: F401  (a build without distributed cannot compare)
    except ImportError:
        print(INSTALL_HINT.format(python=sys.executable), file=sys.stderr)
        sys.exit(2)
    if args.device == "cuda" and not torch.cuda.is_available():
        fail("--device cuda: this PyTorch sees no CUDA device")
    if not os.path.isfile(args.zerolap) or not os.access(args.zerolap, os.X_OK):
        fail(f"no zerolap binary at {args.zerolap} (build it, or pass --zerolap PATH)")
    if shutil.which("mpirun") is None:
        fail("mpirun not found: zerolap runs under Open MPI's mpirun (scripts/setup.sh)")

    config = load_config(args.config, args.overrides)
    build_model(torch, config)  # a config this script cannot build fails before any run
    precision_of(config)
    print_header(args.config, config, worlds)
    config_path = os.path.abspath(args.config)
    with tempfile.TemporaryDirectory(prefix="compare_torch_") as workdir:
        checked = []

        def measure(world, threads, purpose=""):
            overrides = args.overrides + ([f"runtime.threads={threads}"] if purpose else [])
            zl_report = run_zerolap(args.zerolap, config_path, overrides, world, args.device,
                                    workdir, f"t{threads}")
            if not checked and args.device == "cpu":  # before PyTorch's runs: its BLAS is fit
                shapes = zerolap_gemm_shapes(zl_report)
                if shapes:
                    check_gemm_rates(gemm_rate(torch_gemm_shapes(torch, shapes, threads)),
                                     gemm_rate(shapes), threads)
                checked.append(True)
            torch_report = run_torch(config, world, threads, args.device, workdir)
            return print_world(world, torch_report, zl_report, config, args.device, purpose)

        summary = [(world,) + measure(world, threads_per_rank(config, world)) for world in worlds]
        # Weak scaling holds what each rank has fixed: its batch and its threads. Where "auto"
        # gives the smallest world more threads per rank than a larger one, the smallest world
        # runs once more with the larger world's threads, and that run is the baseline.
        base_world = summary[0][0]
        baselines = {threads_per_rank(config, base_world): summary[0][1:]}
        for world, t, z in summary[1:]:
            threads = threads_per_rank(config, world)
            if threads not in baselines:
                baselines[threads] = measure(
                    base_world, threads,
                    f" at {threads} thread(s) per rank, as each of {world} ranks (weak scaling)")
            base_torch, base_zl = baselines[threads]
            if not (t and z and base_torch and base_zl):
                continue
            print(weak_scaling_line(base_world, world, threads, (base_torch, base_zl), (t, z)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
