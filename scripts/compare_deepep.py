#!/usr/bin/python3
"""Holds `moesim collective` against the published DeepEP V1 normal-kernel table.

With --low-latency: against the low-latency table instead (its "current_with_nvlink" rows, or
--ll-table original_pure_rdma): 128 tokens per GPU, top-8 of 256 experts, uniform routing,
`--algorithm low_latency` (every selection sent directly; `--ll-transport nvlink`, NVLink within
a node, for the current table, `rdma`, every peer over the network, for the pure-RDMA one), on
topologies/h800-128x8.toml (EP up to 256); compares the published kernel latency with moesim's
(with --profile: the profile's link classes and low-latency kernel costs applied), and the
published RDMA GB/s (every selection's bytes / latency) with moesim's low-latency logical GB/s.

For every row of deepep_v1_normal_h800.csv (../shared/data/benchmarks/, README.md there) it runs
one synthetic layer as DeepEP's tests route it (4,096 tokens per GPU, hidden 7,168, top-8 of 256
experts, groups = nodes, each token kept to the top min(nodes, 4) nodes; EP8 direct over NVLink,
EP16-64 hierarchical) and prints, per row, the published "bottleneck bandwidth", moesim's logical
bandwidth counted the way DeepEP counts it (intranode: tokens received including the rank's own
copy; internode: (token, node) pairs including the own node; docs/network.md) and moesim's
physical bottleneck-link bandwidth, with the signed errors (moesim - published) / published.

usage: scripts/compare_deepep.py [--moesim build/apps/moesim] [--benchmarks DIR]
                                 [--topology topologies/h800-8x8.toml] [--profile P.toml]
                                 [--no-node-limit] [--markdown] [--low-latency [--ll-table T]]
"""
import argparse
import csv
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from deepep_to_measurements import collective_command, ll_collective_command  # noqa: E402


def run_row(args, row):
    cmd = collective_command(args.moesim, args.topology, row, node_limit=not args.no_node_limit)
    if args.profile:
        cmd += ["--profile", args.profile]
    out = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    phase = out[row["phase"]]
    key = "intranode_gbytes_per_s" if row["scope"] == "intranode" else "internode_gbytes_per_s"
    return phase["logical"][key], phase["bottleneck"]["bandwidth_gbytes_per_s"], phase["latency_us"]


def run_ll_row(args, row):
    cmd = ll_collective_command(args.moesim, args.ll_topology, row)
    if args.profile:
        cmd += ["--profile", args.profile]
    out = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    phase = out[row["phase"]]
    return phase["latency_us"], phase["logical"]["low_latency_gbytes_per_s"]


def low_latency(args):
    with open(os.path.join(args.benchmarks, "deepep_v1_low_latency_h800.csv"), newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["table"] == args.ll_table]
    if args.markdown:
        print("| phase | EP | published us | moesim us | error | published GB/s | moesim logical "
              "GB/s |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
    worst = 0.0
    for row in rows:
        pub = float(row["latency_us"])
        got, gbps = run_ll_row(args, row)
        err = got / pub - 1
        worst = max(worst, abs(err))
        if args.markdown:
            print(f"| {row['phase']} | {row['ep']} | {pub:g} | {got:.1f} | {100 * err:+.1f}% "
                  f"| {row['rdma_gbytes_per_s']} | {gbps:.1f} |")
        else:
            print(f"{row['phase']:8} EP{row['ep']:>3} published {pub:6.0f} us  moesim {got:6.1f} us "
                  f"({100 * err:+5.1f}%)  published {row['rdma_gbytes_per_s']:>4} GB/s  "
                  f"logical {gbps:6.1f} GB/s")
    print(f"worst |latency error|: {100 * worst:.1f}%", file=sys.stderr)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--moesim", default=os.path.join(ROOT, "build/apps/moesim"))
    p.add_argument("--benchmarks", default=os.path.join(ROOT, "../shared/data/benchmarks"))
    p.add_argument("--topology", default=os.path.join(ROOT, "topologies/h800-8x8.toml"))
    p.add_argument("--profile")
    p.add_argument("--no-node-limit", action="store_true",
                   help="route without the node limit (independent unique (token, node) pairs)")
    p.add_argument("--markdown", action="store_true")
    p.add_argument("--low-latency", action="store_true", help="the low-latency table instead")
    p.add_argument("--ll-table", default="current_with_nvlink",
                   choices=["current_with_nvlink", "original_pure_rdma"])
    p.add_argument("--ll-topology", default=os.path.join(ROOT, "topologies/h800-128x8.toml"))
    args = p.parse_args()
    if args.low_latency:
        low_latency(args)
        return
    path = os.path.join(args.benchmarks, "deepep_v1_normal_h800.csv")
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if args.markdown:
        print("| phase | EP | published GB/s | logical GB/s | error | physical GB/s | error "
              "| latency us |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    worst = 0.0
    for row in rows:
        pub = float(row["bottleneck_gbytes_per_s"])
        logical, physical, latency = run_row(args, row)
        err_l = logical / pub - 1
        err_p = physical / pub - 1
        worst = max(worst, abs(err_l))
        if args.markdown:
            print(f"| {row['phase']} | {row['ep']} | {pub:g} | {logical:.1f} | {100 * err_l:+.1f}% "
                  f"| {physical:.1f} | {100 * err_p:+.1f}% | {latency:.0f} |")
        else:
            print(f"{row['phase']:8} EP{row['ep']:>3} published {pub:6.1f}  logical {logical:6.1f} "
                  f"({100 * err_l:+5.1f}%)  physical {physical:6.1f} ({100 * err_p:+5.1f}%)  "
                  f"{latency:7.0f} us")
    print(f"worst |logical error|: {100 * worst:.1f}%", file=sys.stderr)


if __name__ == "__main__":
    main()
