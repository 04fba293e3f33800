#!/usr/bin/env python3
"""Peak memory of a run at 10^7 arrivals (docs/reliability.md, "Memory and overload").

Runs tests/data/scenarios/tiny_overload.toml (10^7 arrivals per second on the tiny model and one
H200, which serves about 26,000 requests per second) for --duration simulated seconds (default
1.05: just over 10^7 arrivals), once with a summary only and once with --out (requests.csv
written while the run goes, the rejected requests' records spooled in an unnamed file), and
prints each run's arrivals, wall time and peak RSS (the child's ru_maxrss). Fails (exit 1) when a
run's peak RSS exceeds --ceiling-mb. The ctest (tests/sim/serving/overload_memory_test.cc) checks
the same bound at 10^5 and 10^6 arrivals; this is the 10^7 case, too long for every CI run.

usage: bench/overload_memory.py [--moesim build/apps/moesim] [--duration 1.05] [--ceiling-mb 64]
                                [--no-out]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCENARIO = os.path.join(ROOT, "tests", "data", "scenarios", "tiny_overload.toml")


def run(moesim, duration, out_dir, stdout_path):
    """Runs one child (its summary to stdout_path); returns (summary, wall s, peak RSS in MB)."""
    args = [moesim, "run", SCENARIO, "--duration", str(duration), "--json"]
    if out_dir:
        args += ["--out", out_dir]
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        fd = os.open(stdout_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.execv(moesim, args)
    _, status, usage = os.wait4(pid, 0)
    wall = time.monotonic() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"overload_memory: {' '.join(args)} exited with {status}")
    with open(stdout_path) as f:
        summary = json.load(f)
    return summary, wall, usage.ru_maxrss / 1024.0


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--moesim", default=os.path.join(ROOT, "build", "apps", "moesim"))
    p.add_argument("--duration", type=float, default=1.05)
    p.add_argument("--ceiling-mb", type=float, default=64)
    p.add_argument("--no-out", action="store_true", help="skip the run with --out")
    a = p.parse_args()
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        for label, out_dir in [("summary only", None), ("--out", os.path.join(tmp, "out"))]:
            if out_dir and a.no_out:
                continue
            summary, wall, rss_mb = run(a.moesim, a.duration, out_dir,
                                        os.path.join(tmp, "summary.json"))
            req = summary["requests"]
            arrived = req["arrived"] + summary["measurement"]["warmup_requests"]
            rejected = summary["actions"].get("reject:queue_full", 0)
            ok = rss_mb <= a.ceiling_mb and summary["conservation_ok"]
            failed |= not ok
            print(f"{label:13s} arrivals {arrived:>11,d} rejected {rejected:>11,d} "
                  f"wall {wall:6.1f} s peak RSS {rss_mb:6.1f} MB "
                  f"{'ok' if ok else 'OVER'} (ceiling {a.ceiling_mb:g} MB)")
            if out_dir:
                size = os.path.getsize(os.path.join(out_dir, "requests.csv"))
                print(f"{'':13s} requests.csv {size / 1e9:.2f} GB")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
