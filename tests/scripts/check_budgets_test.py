#!/usr/bin/env python3
"""scripts/check_budgets.py on made-up trees: a tree at every limit passes (a 100-character line
of box-drawing characters included: columns are characters, not bytes); one over each limit fails
with exit 1 and one line naming each problem. Prints PASS."""
import os
import pathlib
import subprocess
import sys
import tempfile

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts",
                      "check_budgets.py")


def make_tree(root, over):
    """A repository skeleton at the limits, or one past each when `over`."""
    extra = 1 if over else 0
    folder = root / "runtime" / "train" / "step"
    folder.mkdir(parents=True)
    for i in range(24 + extra):
        (folder / f"part_{i}.cpp").write_text("int x;\n")
    (folder / "part_0.cpp").write_text("// " + "─" * 97 + "\n" + "x" * (100 + extra) + "\n")
    run = root / "runtime" / "train" / "run"
    run.mkdir(parents=True)
    (run / "trainer.h").write_text("\n" * (120 + extra))
    (root / "docs").mkdir()
    (root / "docs" / "design.md").write_text("line\n" * (300 + extra))
    (root / "docs" / "bench.md").write_text("line\n" * (400 + extra))


def check(root):
    return subprocess.run([sys.executable, SCRIPT, str(root)], capture_output=True, text=True)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        at_limit = pathlib.Path(tmp) / "at_limit"
        make_tree(at_limit, over=False)
        result = check(at_limit)
        assert result.returncode == 0 and result.stdout == "", result

        over = pathlib.Path(tmp) / "over"
        make_tree(over, over=True)
        result = check(over)
        assert result.returncode == 1, result
        assert result.stdout.splitlines() == [
            "runtime/train/step/ holds 25 files, more than 24: split it by concept",
            "runtime/train/step/part_0.cpp:2: 101 columns, more than 100",
            "runtime/train/run/trainer.h: 121 lines, more than 120",
            "docs/design.md: 301 lines, more than 300",
            "docs/bench.md: 401 lines, more than 400",
            "5 problems",
        ], result.stdout
    print("PASS")


if __name__ == "__main__":
    main()
