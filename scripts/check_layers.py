#!/usr/bin/env python3
"""Fails when a source file includes a header of a layer it must not depend on, or lies outside
every layer folder.

The layers and their one-way order are those of docs/design.md ("Layers"): a file may include
headers of its own folder and of the folders listed as below it, nothing else of the project.
Usage: scripts/check_layers.py [REPO_ROOT]. Exit 0 clean, 1 with one line per problem.
"""
import pathlib
import re
import sys

# folder -> the folders it may include besides itself. Dependencies point one way:
#   runtime/cli -> runtime/bench -> runtime/train/run
#   runtime/cli -> runtime/checkpoint -> runtime/checkpoint/files -> runtime/train/run
#   runtime/train/run -> runtime/train/step -> runtime/train/plan -> runtime/trace -> runtime/config
#   runtime/config -> runtime/comm/backends -> runtime/comm/link -> runtime/comm -> kernels -> base
#   runtime/config -> models, data; models -> kernels; data -> base
# runtime/config sits above runtime/comm: it embeds the communicator options
# (runtime/comm/comm_options.h), and communicators never see the config (nor, through it, models
# and data). runtime/comm is the communicator API and what it runs on (world, streams, timed MPI);
# the modelled link decorates a communicator (link), and the device picks one of the MPI and NCCL
# backends (backends), whose NCCL side runs the link's delays on its stream. runtime/train is three
# layers: what a mode implies before anything runs (plan), the parts of one step (step), and the
# Trainer that runs them (run). runtime/checkpoint saves and loads a training state (collective,
# either format) on top of runtime/checkpoint/files: the files and directories themselves,
# rank-local and without MPI.
BELOW = {
    "base": [],
    "kernels": ["base"],
    "models": ["kernels", "base"],
    "data": ["base"],
    "runtime/comm": ["kernels", "base"],
}


def under(folder):
    """`folder` and everything it may include: what a layer directly above it may include."""
    return [folder, *BELOW[folder]]


BELOW["runtime/comm/link"] = under("runtime/comm")
BELOW["runtime/comm/backends"] = under("runtime/comm/link")
BELOW["runtime/config"] = under("runtime/comm/backends") + ["models", "data"]
BELOW["runtime/trace"] = under("runtime/config")
BELOW["runtime/train/plan"] = under("runtime/trace")
BELOW["runtime/train/step"] = under("runtime/train/plan")
BELOW["runtime/train/run"] = under("runtime/train/step")
BELOW["runtime/checkpoint/files"] = under("runtime/train/run")
BELOW["runtime/checkpoint"] = under("runtime/checkpoint/files")
BELOW["runtime/bench"] = under("runtime/train/run")
BELOW["runtime/cli"] = under("runtime/bench") + under("runtime/checkpoint")
# The trees the layers live in: a source file there outside every listed folder is reported (a new
# folder must be given its place in the order before its files are checked).
ROOTS = ("base", "kernels", "models", "data", "runtime")
SUFFIXES = (".h", ".cpp", ".cu", ".cuh")
# Upward includes still being removed, each with the change that removes it. Must end empty.
KNOWN = set()
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def folder_of(path):
    """The layer folder a repo-relative path belongs to, or None outside the layers."""
    parts = pathlib.PurePosixPath(path).parts
    for depth in (3, 2, 1):
        key = "/".join(parts[:depth])
        if key in BELOW and len(parts) > depth:
            return key
    return None


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    violations = []
    checked = 0
    for layer in BELOW:
        for source in sorted((root / layer).glob("*")):
            if source.suffix not in SUFFIXES:
                continue
            checked += 1
            allowed = {layer, *BELOW[layer]}
            rel = source.relative_to(root).as_posix()
            for number, line in enumerate(source.read_text().splitlines(), 1):
                match = INCLUDE.match(line)
                if not match:
                    continue
                target = folder_of(match.group(1))
                if (target is not None and target not in allowed
                        and (rel, match.group(1)) not in KNOWN):
                    violations.append(f"{rel}:{number}: includes {match.group(1)} "
                                      f"({layer} must not depend on {target})")
    for tree in ROOTS:
        for source in sorted((root / tree).rglob("*")):
            rel = source.relative_to(root)
            if source.suffix in SUFFIXES and rel.parent.as_posix() not in BELOW:
                violations.append(f"{rel.as_posix()}: in no layer folder (give "
                                  f"{rel.parent.as_posix()} its place in BELOW)")
    if checked == 0:
        print(f"check_layers: no sources found under {root}")
        return 1
    for v in violations:
        print(v)
    print(f"check_layers: {checked} files, {len(violations)} problems")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
