#!/usr/bin/env python3
"""scripts/serving_validation.py: the commands `run --dry-run` prints (order, interleaved
repeats, overrides reaching export and validation) and `delta` on two hand-made reports."""

import contextlib
import io
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts"))
import serving_validation as sv  # noqa: E402


def capture(argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = sv.main(argv)
    return rc, out.getvalue()


class DryRun(unittest.TestCase):
    def test_commands(self):
        rc, out = capture(["run", "--scenario", "s.toml", "--rates", "1,2.5", "--repeats", "2",
                           "--moesim", "M", "--engine", "E", "--profile", "p.toml",
                           "--set", "policies.concurrency_cap.max_seqs_per_replica=32",
                           "--engine-arg=--threads=2", "--out", "X", "--dry-run"])
        self.assertEqual(rc, 0)
        lines = [l[2:] for l in out.splitlines() if l.startswith("+ ")]
        cap = "--set policies.concurrency_cap.max_seqs_per_replica=32"
        self.assertEqual(lines, [
            "M run s.toml --set workload.arrival.rate_per_s=1.0 " + cap +
            " --export-requests X/traces/rate-1.jsonl",
            "M run s.toml --set workload.arrival.rate_per_s=2.5 " + cap +
            " --export-requests X/traces/rate-2.5.jsonl",
            "E serve X/traces/rate-1.jsonl --out X/serve/rate-1/run-0 --threads=2",
            "E serve X/traces/rate-2.5.jsonl --out X/serve/rate-2.5/run-0 --threads=2",
            "E serve X/traces/rate-1.jsonl --out X/serve/rate-1/run-1 --threads=2",
            "E serve X/traces/rate-2.5.jsonl --out X/serve/rate-2.5/run-1 --threads=2",
            "M validate s.toml --profile p.toml " + cap + " --out X/validate --serving "
            "X/serve/rate-1/run-0 X/serve/rate-2.5/run-0 X/serve/rate-1/run-1 "
            "X/serve/rate-2.5/run-1",
        ])
        self.assertFalse(os.path.exists("X"))  # a dry run creates nothing


def report(points, knee_measured, knee_predicted):
    return {"schema": "moesim.serving_validation.v1",
            "knee": {"measured": {"rate_per_s": knee_measured},
                     "predicted": {"rate_per_s": knee_predicted}},
            "points": [{"offered_rate_per_s": rate, "side": "below",
                        "metrics": {"ttft_p99_ms": {"engine_mean": e, "simulated": s}}}
                       for rate, e, s in points]}


class Delta(unittest.TestCase):
    def test_sign_and_size(self):
        # Cap 32 -> 128: measured TTFT p99 100 -> 80 (-20), predicted 110 -> 95 (-15): signs
        # agree, size 0.75. At the second point the prediction moves the wrong way.
        a = report([(1.0, 100.0, 110.0), (2.0, 200.0, 200.0)], 3.0, 2.5)
        b = report([(1.0, 80.0, 95.0), (2.0, 150.0, 210.0)], 4.0, 3.0)
        rows = sv.deltas(a, b)
        self.assertEqual(len(rows), 2)
        self.assertAlmostEqual(rows[0]["measured"], -20)
        self.assertAlmostEqual(rows[0]["predicted"], -15)
        self.assertAlmostEqual(rows[0]["measured_rel"], -0.2)
        self.assertTrue(rows[0]["sign_agrees"])
        self.assertAlmostEqual(rows[0]["size_ratio"], 0.75)
        self.assertFalse(rows[1]["sign_agrees"])
        with tempfile.TemporaryDirectory() as d:
            for name, r in (("a.json", a), ("b.json", b)):
                with open(os.path.join(d, name), "w") as f:
                    json.dump(r, f)
            rc, out = capture(["delta", os.path.join(d, "a.json"), os.path.join(d, "b.json"),
                               "--label-a", "cap32", "--label-b", "cap128"])
        self.assertEqual(rc, 0)
        self.assertIn("| 1 | below | ttft_p99_ms | -20 | -20.0% | -15 | -13.6% | agrees | 0.75 |",
                      out)
        self.assertIn("| WRONG |", out)
        self.assertIn("knee delta (req/s): measured 1, predicted 0.5", out)


if __name__ == "__main__":
    unittest.main()
