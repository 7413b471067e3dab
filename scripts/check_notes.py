#!/usr/bin/env python3
"""Fails when a titled note is cited but not defined exactly once, or is missing from the index.

A note is defined in code by a comment line that starts `// Note [Title]:` (the colon marks the
definition); any other `Note [Title]`, in code or in docs/*.md, README.md and the scripts, cites
it (a title may wrap onto the next comment line). docs/design.md's "Titled notes" table is the
index: each row names notes (comma-separated) and the file that defines them. Every defined or
cited note must be defined exactly once, and listed in the index under its defining file; the
index may list nothing else. Usage: scripts/check_notes.py [REPO_ROOT]. Exit 0 clean, 1 with one
line per problem.
"""
import pathlib
import re
import sys

SOURCE_SUFFIXES = {".h", ".cpp", ".cu", ".cuh", ".py", ".sh", ".cmake", ".txt", ".md"}
SKIP_DIRS = {".git", "fixtures", "notes_fixture", "layering_fixture"}
SKIP_FILES = {"scripts/check_notes.py"}  # its own docstring and messages show the syntax
DEFINITION = re.compile(r"^\s*(?://|#)\s*Note \[([^\]]+)\]:")
CITATION = re.compile(r"Note\s+\[([^\]]+)\]")
COMMENT_WRAP = re.compile(r"\s*\n\s*(?://+|#+|\*)?\s*")


def tracked_files(root):
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if any(part in SKIP_DIRS or part.startswith("build") for part in rel.parts[:-1]):
            continue
        if rel.as_posix() in SKIP_FILES:
            continue
        if path.is_file() and (path.suffix in SOURCE_SUFFIXES or path.name == "CMakeLists.txt"):
            yield path


def title_of(raw):
    """A cited title with its line wrap (and the comment marker of the next line) folded."""
    return " ".join(COMMENT_WRAP.sub(" ", raw).split())


def read_index(design):
    """{title: file} from docs/design.md's "Titled notes" table."""
    index = {}
    duplicates = []
    lines = design.read_text().splitlines()
    try:
        start = lines.index("## Titled notes")
    except ValueError:
        return index, ["docs/design.md: no '## Titled notes' section"]
    for line in lines[start + 1:]:
        if line.startswith("## "):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 2 or cells[0] in ("note", "") or set(cells[0]) <= {"-"}:
            continue
        where = cells[1].strip("`")
        for title in (t.strip() for t in cells[0].split(",")):
            if title in index:
                duplicates.append(f"docs/design.md: note [{title}] is listed twice in the index")
            index[title] = where
    return index, duplicates


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    design = root / "docs" / "design.md"
    if not design.is_file():
        print(f"check_notes: no docs/design.md under {root}")
        return 1
    definitions = {}  # title -> ["file:line", ...]
    citations = {}    # title -> first "file:line"
    files = 0
    for path in tracked_files(root):
        files += 1
        rel = path.relative_to(root).as_posix()
        text = path.read_text(errors="replace")
        for number, line in enumerate(text.splitlines(), 1):
            match = DEFINITION.match(line)
            if match and path.suffix != ".md":
                definitions.setdefault(match.group(1), []).append(f"{rel}:{number}")
        for match in CITATION.finditer(text):
            number = text.count("\n", 0, match.start()) + 1
            citations.setdefault(title_of(match.group(1)), f"{rel}:{number}")
    index, problems = read_index(design)
    for title, where in sorted(citations.items()):
        if title not in definitions:
            problems.append(f"{where}: note [{title}] is cited but never defined "
                            f"(define it as '// Note [{title}]: ...')")
    for title, places in sorted(definitions.items()):
        if len(places) > 1:
            problems.append(f"{places[1]}: note [{title}] is defined {len(places)} times "
                            f"({', '.join(places)}); cite it instead")
        defined_in = places[0].rsplit(":", 1)[0]
        if title not in index:
            problems.append(f"{places[0]}: note [{title}] is missing from the index in "
                            f"docs/design.md")
        elif index[title] != defined_in:
            problems.append(f"docs/design.md: the index puts note [{title}] in {index[title]}, "
                            f"but {defined_in} defines it")
    for title in sorted(set(index) - set(definitions)):
        problems.append(f"docs/design.md: the index lists note [{title}], which nothing defines")
    for p in problems:
        print(p)
    print(f"check_notes: {files} files, {len(definitions)} notes, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
