#!/usr/bin/python3
"""Converts DeepEP V1's published normal-kernel table into `collective` measurement records.

Input: deepep_v1_normal_h800.csv (../shared/data/benchmarks/, whose README.md gives the sources
and byte definitions). Output: a measurement file (docs/schemas/measurement.md: a header, then one
`collective` record per table row) that `moesim calibrate --topology` fits (docs/calibration.md,
"Public profiles").

Each row is a DeepEP kernel run: per rank, logical bytes / published bandwidth = kernel time. The
logical bytes, and the physical traffic the kernel moves, come from `moesim collective` with the
row's shape routed as DeepEP's tests route it (4,096 tokens per GPU, hidden 7,168, top-8 of 256
experts, groups = nodes, top min(nodes, 4) nodes; EP8 direct over NVLink, EP16-64 hierarchical)
on the nominal topology. The record is the uniform all-to-all whose bottleneck link carries what
the kernel's bottleneck link carries, in the measured time:
- bottleneck on NVLink: ep_size 8 (one node), bytes_per_gpu = the bottleneck link's bytes (a GPU
  sends everything over its NVLink port);
- bottleneck on the network: ep_size = EP, bytes_per_gpu = bottleneck bytes x (EP - 1) /
  (EP - gpus per node) (a uniform all-to-all sends that share of its bytes through the NIC).
So the network fit's nominal transfer time of the record equals the bottleneck model's time of
the kernel's real (skewed, node-limited) traffic, and the fitted efficiency and latency reproduce
the kernel time when `moesim collective --profile` runs that traffic.

With --low-latency: DeepEP V1's low-latency table (deepep_v1_low_latency_h800.csv, both its
"current_with_nvlink" and "original_pure_rdma" rows) instead, on topologies/h800-128x8.toml (EP up
to 256). Each row is `moesim collective --algorithm low_latency` (128 tokens per GPU, hidden 7,168,
top-8 of 256 experts, uniform routing: DeepEP's LL test limits no groups; `--ll-transport nvlink`
for the current table, `rdma` for the pure-RDMA one); the record is the uniform all-to-all whose
bottleneck link carries what the kernel's carries (as above; pure RDMA: ep_size = EP and
bytes_per_gpu = the bottleneck NIC's bytes, every peer being over the network), in the published
latency, with "kernel": "low_latency_dispatch" / "low_latency_combine" and "transport": "nvlink" /
"rdma". `moesim calibrate` fits each kernel's fixed cost (and efficiency) on top of the link
classes that the normal-kernel records fit (docs/calibration.md).

usage: scripts/deepep_to_measurements.py -o OUT.jsonl [--moesim build/apps/moesim]
                                         [--benchmarks DIR] [--topology T.toml] [--low-latency]
"""
import argparse
import csv
import json
import os

from published_measurements import header, write_jsonl
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def collective_command(moesim, topology, row, algorithm=None, node_limit=True):
    """The `moesim collective --json` command line of one published row: its EP size, tokens,
    hidden size, top-k and dtypes on 256 experts; the normal kernels' algorithm by scope unless
    `algorithm` is given; DeepEP's node limit (top-4 of one group per node) beyond one node."""
    ep = int(row["ep"])
    nodes = max(1, ep // 8)
    if algorithm is None:
        algorithm = "direct" if row["scope"] == "intranode" else "hierarchical"
    cmd = [moesim, "collective", "--topology", topology, "--ep", str(ep),
           "--tokens-per-gpu", row["tokens_per_gpu"], "--hidden", row["hidden"],
           "--top-k", row["top_k"], "--experts", "256",
           "--dispatch-dtype", row["dispatch_dtype"], "--combine-dtype", row["combine_dtype"],
           "--algorithm", algorithm, "--json"]
    if node_limit and nodes > 1:
        cmd += ["--expert-groups", str(nodes), "--topk-groups", str(min(nodes, 4))]
    return cmd


def collective(args, row):
    cmd = collective_command(args.moesim, args.topology, row)
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def ll_transport(row):
    """The --ll-transport of a low-latency table row."""
    return "rdma" if row["table"] == "original_pure_rdma" else "nvlink"


def ll_collective_command(moesim, topology, row):
    """The `moesim collective --json` command line of one low-latency row."""
    return collective_command(moesim, topology, row, algorithm="low_latency",
                              node_limit=False) + ["--ll-transport", ll_transport(row)]


def low_latency_records(args):
    with open(os.path.join(args.benchmarks, "deepep_v1_low_latency_h800.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    records = []
    gpn = args.gpus_per_node
    for row in rows:
        ep = int(row["ep"])
        cmd = ll_collective_command(args.moesim, args.topology, row)
        out = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
        b = out[row["phase"]]["bottleneck"]
        transport = ll_transport(row)
        if b["class"] not in ("nvlink", "nic"):
            raise SystemExit(f"{row['table']} {row['phase']} EP{ep}: bottleneck on a "
                             f"{b['class']} link, which a uniform all-to-all cannot stand for")
        if transport == "rdma":
            ep_size, bytes_per_gpu = ep, b["bytes"]
        elif b["class"] == "nvlink":
            ep_size, bytes_per_gpu = gpn, b["bytes"]
        else:
            ep_size, bytes_per_gpu = ep, b["bytes"] * (ep - 1) / (ep - gpn)
        records.append({"record": "collective", "op": "alltoall",
                        "kernel": "low_latency_" + row["phase"], "transport": transport,
                        "ep_size": ep_size, "bytes_per_gpu": bytes_per_gpu,
                        "measured_ns": round(float(row["latency_us"]) * 1e3),
                        "source": f"deepep-low-latency {row['table']} {row['phase']} EP{ep} "
                                  f"{row['latency_us']} us ({b['class']})"})
    return records


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-o", "--out", required=True)
    p.add_argument("--moesim", default=os.path.join(ROOT, "build/apps/moesim"))
    p.add_argument("--benchmarks", default=os.path.join(ROOT, "../shared/data/benchmarks"))
    p.add_argument("--topology")
    p.add_argument("--gpus-per-node", type=int, default=8)
    p.add_argument("--low-latency", action="store_true",
                   help="convert the low-latency table (both transports) instead")
    args = p.parse_args()
    if args.topology is None:
        args.topology = os.path.join(ROOT, "topologies/h800-128x8.toml" if args.low_latency
                                     else "topologies/h800-8x8.toml")
    records = [header("H800 SXM5 (published benchmarks)", "deepep-v1")]
    if args.low_latency:
        records += low_latency_records(args)
        with open(args.out, "w") as f:
            for r in records:
                f.write(json.dumps(r) + "\n")
        return
    with open(os.path.join(args.benchmarks, "deepep_v1_normal_h800.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    gpn = args.gpus_per_node
    for row in rows:
        ep = int(row["ep"])
        phase = collective(args, row)[row["phase"]]
        key = "intranode_bytes_per_rank" if row["scope"] == "intranode" else \
            "internode_bytes_per_rank"
        logical = phase["logical"][key]
        seconds = logical / (float(row["bottleneck_gbytes_per_s"]) * 1e9)
        b = phase["bottleneck"]
        if b["class"] == "nvlink":
            ep_size, bytes_per_gpu = gpn, b["bytes"]
        else:
            ep_size, bytes_per_gpu = ep, b["bytes"] * (ep - 1) / (ep - gpn)
        records.append({"record": "collective", "op": "alltoall", "ep_size": ep_size,
                        "bytes_per_gpu": bytes_per_gpu, "measured_ns": round(seconds * 1e9),
                        "source": f"deepep-normal {row['phase']} EP{ep} "
                                  f"{row['bottleneck_gbytes_per_s']} GB/s ({b['class']})"})
    write_jsonl(args.out, records)


if __name__ == "__main__":
    main()
