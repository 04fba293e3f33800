#!/usr/bin/python3
"""Tests of the structure checker on the fixture tree tests/data/structure/: it finds exactly the
violations planted there (one or more per rule, beside files and functions at the limits and
includes that are allowed), and passes a tree without them."""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKER = os.path.join(HERE, "check_structure.py")
FIXTURE = os.path.join(HERE, "..", "data", "structure")

EXPECTED = {
    ("sim/too_long_file.h", 1, "file-size"),
    ("sim/functions.cc", 4, "function-size"),
    ("engine/cuda/kernel.cu", 2, "function-size"),
    ("sim/uses_engine.h", 4, "include"),
    ("engine/uses_sim.cc", 4, "include"),
    ("sim/serving/uses_calibration.cc", 3, "include"),
    ("python/binding.cc", 3, "include"),
    ("bench/some_bench.cc", 2, "include"),
    ("base/shared.h", 3, "include"),
    ("base/shared.h", 4, "include"),
}


def run_checker(root, *extra):
    return subprocess.run([sys.executable, CHECKER, "--root", root, *extra], capture_output=True,
                          text=True)


def parse(stdout):
    found = set()
    for line in stdout.splitlines():
        path, line_no, rule, _ = line.split(":", 3)
        found.add((path, int(line_no), rule.strip()))
    return found


class CheckStructureTest(unittest.TestCase):
    def test_finds_exactly_the_planted_violations(self):
        proc = run_checker(FIXTURE)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertEqual(parse(proc.stdout), EXPECTED)

    def test_names_and_sizes_in_details(self):
        out = run_checker(FIXTURE).stdout
        self.assertIn("sim/too_long_file.h:1: file-size: 501 lines (limit 500)", out)
        self.assertIn("sim/functions.cc:4: function-size: over_limit is 121 lines", out)
        # The kernel is named despite __launch_bounds__ between its return type and its name.
        self.assertIn("engine/cuda/kernel.cu:2: function-size: long_kernel is 130 lines", out)

    def test_passes_a_tree_without_violations(self):
        with tempfile.TemporaryDirectory() as tmp:
            root = os.path.join(tmp, "tree")
            shutil.copytree(FIXTURE, root)
            for path in {p for p, _, _ in EXPECTED}:
                os.remove(os.path.join(root, path))
            proc = run_checker(root)
            self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
            self.assertEqual(proc.stdout, "")

    def test_refuses_to_run_without_ctags(self):
        proc = run_checker(FIXTURE, "--ctags", "/nonexistent/ctags")
        self.assertEqual(proc.returncode, 2)
        self.assertIn("universal-ctags", proc.stderr)


if __name__ == "__main__":
    unittest.main()
