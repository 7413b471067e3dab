#!/usr/bin/env python3
"""Fails when the code layout or the docs outgrow the sizes the project holds them to.

The budgets keep the map readable: no folder under runtime/ holds more than 24 files (split it by
concept instead), no runtime/ source line is over 100 columns (counted in characters, so a
box-drawing diagram counts as drawn), runtime/train/run/trainer.h stays at most 120 lines,
docs/design.md at most 300 and docs/bench.md at most 400 (the design doc is the map, the bench
doc one current table per claim; history lives in git). Usage: scripts/check_budgets.py
[REPO_ROOT]. Exit 0 within budget, 1 with one line per problem.
"""
import pathlib
import sys

MAX_FILES_PER_FOLDER = 24
MAX_COLUMNS = 100
MAX_LINES = {
    "runtime/train/run/trainer.h": 120,
    "docs/design.md": 300,
    "docs/bench.md": 400,
}
SOURCE_SUFFIXES = {".h", ".cpp", ".cu", ".cuh"}


def problems(root):
    runtime = root / "runtime"
    for folder in sorted(p for p in [runtime, *runtime.rglob("*")] if p.is_dir()):
        files = [p for p in folder.iterdir() if p.is_file()]
        if len(files) > MAX_FILES_PER_FOLDER:
            yield (f"{folder.relative_to(root)}/ holds {len(files)} files, more than "
                   f"{MAX_FILES_PER_FOLDER}: split it by concept")
    for path in sorted(runtime.rglob("*")):
        if path.suffix not in SOURCE_SUFFIXES:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if len(line) > MAX_COLUMNS:
                yield (f"{path.relative_to(root)}:{number}: {len(line)} columns, more than "
                       f"{MAX_COLUMNS}")
    for name, limit in MAX_LINES.items():
        lines = len((root / name).read_text(encoding="utf-8").splitlines())
        if lines > limit:
            yield f"{name}: {lines} lines, more than {limit}"


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    found = list(problems(root))
    for problem in found:
        print(problem)
    if found:
        print(f"{len(found)} problem{'' if len(found) == 1 else 's'}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
