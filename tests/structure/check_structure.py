#!/usr/bin/python3
"""The structure test (docs/structure.md): file sizes, function sizes and forbidden includes.

Rules, each violation printed as `path:line: rule: detail`:
  file-size      a .h / .cc file under sim/ longer than 500 lines;
  function-size  a function longer than 120 lines (from its name's line to its closing brace,
                 lambdas inside it included) in sim/, apps/, engine/ (C++ and CUDA), python/,
                 bench/ and base/, measured with universal-ctags;
  include        an #include across a boundary the design forbids (FORBIDDEN_INCLUDES below).
Exits 1 when any rule is broken, 2 when the checker itself cannot run (ctags missing), else 0.
There is no exemption list: a file or function that breaks a rule is split.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys

MAX_FILE_LINES = 500
MAX_FUNCTION_LINES = 120

# Folders whose files the size rules read, relative to the root.
FILE_SIZE_DIRS = ["sim"]
FUNCTION_SIZE_DIRS = ["sim", "apps", "engine", "python", "bench", "base"]
INCLUDE_DIRS = ["sim", "apps", "engine", "python", "bench", "base"]
CXX_SUFFIXES = (".h", ".cc", ".cu", ".cuh")

# (including folder, included folder, why): a file under the first may not include a header
# under the second. Folders end with "/" so that "sim/" does not match "simx/".
FORBIDDEN_INCLUDES = [
    ("sim/", "engine/", "sim/ and engine/ meet only in the step-trace and measurement schemas"),
    ("engine/", "sim/", "sim/ and engine/ meet only in the step-trace and measurement schemas"),
    ("sim/serving/", "sim/calibration/", "calibration sits above serving"),
    ("python/", "apps/", "the Python module uses the library API, not the command line"),
    ("bench/", "apps/", "benchmarks use the library API, not the command line"),
    ("base/", "sim/", "base/ is shared by sim/ and engine/ and depends on neither"),
    ("base/", "engine/", "base/ is shared by sim/ and engine/ and depends on neither"),
]

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*[<"]([^">]+)[">]')

# CUDA's __launch_bounds__(n) sits between a kernel's return type and its name; without this
# definition ctags names the kernel "__launch_bounds__".
CTAGS_ARGS = [
    "-R", "--output-format=json", "--c++-kinds=f", "--fields=+ne", "--languages=C++",
    "--langmap=C++:+.cu.cuh", "-D", "__launch_bounds__(...)=", "-o", "-",
]


def cxx_files(root, dirs):
    """Relative paths of the C++ / CUDA files under `dirs`, sorted."""
    found = []
    for d in dirs:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, d)):
            dirnames[:] = sorted(n for n in dirnames if n != "__pycache__")
            for name in filenames:
                if name.endswith(CXX_SUFFIXES):
                    found.append(os.path.relpath(os.path.join(dirpath, name), root))
    return sorted(found)


def count_lines(path):
    with open(path, "rb") as f:
        data = f.read()
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def check_file_sizes(root):
    out = []
    for rel in cxx_files(root, FILE_SIZE_DIRS):
        if not rel.endswith((".h", ".cc")):
            continue
        n = count_lines(os.path.join(root, rel))
        if n > MAX_FILE_LINES:
            out.append((rel, 1, "file-size", f"{n} lines (limit {MAX_FILE_LINES})"))
    return out


def function_tags(root, ctags):
    """ctags' function tags (dicts with path, name, line, end, scope...) under the size dirs."""
    dirs = [d for d in FUNCTION_SIZE_DIRS if os.path.isdir(os.path.join(root, d))]
    if not dirs:
        return []
    proc = subprocess.run([ctags] + CTAGS_ARGS + dirs, cwd=root, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"ctags failed ({proc.returncode}): {proc.stderr.strip()}")
    tags = []
    for line in proc.stdout.splitlines():
        tag = json.loads(line)
        if tag.get("_type") == "tag" and tag.get("kind") == "function":
            tags.append(tag)
    return tags


def check_function_sizes(root, ctags):
    out = []
    for tag in function_tags(root, ctags):
        # A lambda inside a function is tagged on its own, scoped to that function; its lines are
        # already inside the enclosing function's extent, which is what counts.
        if tag.get("scopeKind") == "function":
            continue
        if "end" not in tag:
            out.append((tag["path"], tag["line"], "function-size",
                        f"{tag['name']}: ctags found no end (cannot measure)"))
            continue
        n = tag["end"] - tag["line"] + 1
        if n > MAX_FUNCTION_LINES:
            scope = tag.get("scope", "")
            name = tag["name"]
            if tag.get("scopeKind") in ("class", "struct"):
                name = scope.split("::")[-1] + "::" + name
            out.append((tag["path"], tag["line"], "function-size",
                        f"{name} is {n} lines (limit {MAX_FUNCTION_LINES})"))
    return out


def check_includes(root):
    out = []
    for rel in cxx_files(root, INCLUDE_DIRS):
        posix = rel.replace(os.sep, "/")
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
            for line_no, text in enumerate(f, start=1):
                m = INCLUDE_RE.match(text)
                if not m:
                    continue
                target = m.group(1)
                for src, dst, why in FORBIDDEN_INCLUDES:
                    if posix.startswith(src) and target.startswith(dst):
                        out.append((rel, line_no, "include",
                                    f"{src[:-1]} includes {target} ({why})"))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=os.path.join(os.path.dirname(__file__), "..", ".."),
                        help="the repository root (default: this script's repository)")
    parser.add_argument("--ctags", default=shutil.which("ctags") or "ctags",
                        help="universal-ctags executable")
    args = parser.parse_args()
    root = os.path.abspath(args.root)
    if shutil.which(args.ctags) is None:
        print(f"check_structure: {args.ctags} not found: install universal-ctags "
              "(scripts/install_deps.sh)", file=sys.stderr)
        return 2
    version = subprocess.run([args.ctags, "--version"], capture_output=True, text=True).stdout
    if "Universal Ctags" not in version:
        print(f"check_structure: {args.ctags} is not universal-ctags", file=sys.stderr)
        return 2

    violations = check_file_sizes(root) + check_function_sizes(root, args.ctags) + \
        check_includes(root)
    for path, line, rule, detail in sorted(violations):
        print(f"{path}:{line}: {rule}: {detail}")
    if violations:
        print(f"check_structure: {len(violations)} violation(s) (docs/structure.md)",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
