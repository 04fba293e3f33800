#!/usr/bin/env python3
"""Request-level agreement of the fast fidelity with the exact fidelity (docs/fast_fidelity.md).

Runs every scenario given (default: every shipped one) on both fidelities for several seeds with
`moesim run --json`, and prints a Markdown table of the fast fidelity's relative difference from the
exact fidelity for TTFT / TPOT p50 and p99, output throughput and the per-layer GPU imbalance,
each averaged over the seeds first (a run's percentiles move with its batches, which both fidelities
form from slightly different step times), next to the spread of the exact fidelity over the seeds
(what one seed's figure is worth).

usage: scripts/fidelity_compare.py [--moesim build/apps/moesim] [--seeds 1,2,3] [--duration S]
                               [SCENARIO ...]
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys

FIGURES = [
    ("TTFT p50", lambda j: j["ttft_ms"]["p50"]),
    ("TTFT p99", lambda j: j["ttft_ms"]["p99"]),
    ("TPOT p50", lambda j: j["tpot_ms"]["p50"]),
    ("TPOT p99", lambda j: j["tpot_ms"]["p99"]),
    ("output tok/s", lambda j: j["throughput"]["output_tokens_per_s"]),
    ("GPU imbalance", lambda j: j["expert_gpu_imbalance_mean"]),
]


def run(moesim, scenario, fidelity, seed, duration):
    cmd = [moesim, "run", scenario, "--fidelity", fidelity, "--seed", str(seed), "--json"]
    if duration:
        cmd += ["--duration", str(duration)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--moesim", default="build/apps/moesim")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--duration", type=float, default=0.0)
    ap.add_argument("scenarios", nargs="*")
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    scenarios = args.scenarios or sorted(
        glob.glob("scenarios/*.toml") + glob.glob("scenarios/policies/*.toml")
    )
    print("| scenario | " + " | ".join(name for name, _ in FIGURES) + " |")
    print("| --- |" + " --- |" * len(FIGURES))
    for sc in scenarios:
        runs = {t: [run(args.moesim, sc, t, s, args.duration) for s in seeds]
                for t in ("exact", "fast")}
        cells = []
        for _, get in FIGURES:
            exact = [get(j) for j in runs["exact"]]
            fast = [get(j) for j in runs["fast"]]
            if any(v is None for v in exact + fast) or statistics.mean(exact) == 0:
                cells.append("n/a")
                continue
            me, mf = statistics.mean(exact), statistics.mean(fast)
            spread = (max(exact) - min(exact)) / me
            cells.append(f"{100 * (mf / me - 1):+.1f}% ({100 * spread:.0f}%)")
        print(f"| {os.path.relpath(sc)} | " + " | ".join(cells) + " |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
