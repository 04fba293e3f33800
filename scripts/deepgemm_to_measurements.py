#!/usr/bin/python3
"""Converts DeepGEMM's published FP8 GEMM table into `gemm` measurement records.

Input: deepgemm_fp8_h800.csv (../shared/data/benchmarks/, whose README.md names the source).
Output: a measurement file (docs/schemas/measurement.md: a header, then one `gemm` record per
table row) that `moesim calibrate --topology` fits into the profile's [compute] section
(docs/calibration.md, "Public profile: compute").

Each row is one GEMM kernel: num_groups groups of m_per_group rows, C[M, n] = A[M, k] B[k, n]
(M = num_groups x m_per_group; dense rows have one group), FP8 inputs, BF16 output. DeepGEMM
reports TFLOPS = 2 M n k / time, so the kernel time is 2 M n k / (TFLOPS x 1e12), written in
integer nanoseconds. The table's memory bandwidth column is (M k + G n k + 2 M n) / time (G the
groups of the grouped layouts); the script checks that it agrees with the TFLOPS column within
1% for every row, so both columns describe the same kernel time.

usage: scripts/deepgemm_to_measurements.py -o OUT.jsonl [--benchmarks DIR]
"""
import argparse
import csv
import os

from published_measurements import header, write_jsonl

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def kernel_seconds(row):
    """Kernel time of a row from its TFLOPS, and the time its GB/s column implies."""
    g, m, n, k = (int(row[c]) for c in ("num_groups", "m_per_group", "n", "k"))
    rows = g * m
    flops = 2.0 * rows * n * k
    t = flops / (float(row["tflops"]) * 1e12)
    bytes_ = rows * k + g * n * k + 2 * rows * n
    t_bw = bytes_ / (float(row["mem_gbytes_per_s"]) * 1e9)
    return t, t_bw


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-o", "--out", required=True)
    p.add_argument("--benchmarks", default=os.path.join(ROOT, "..", "shared", "data", "benchmarks"))
    args = p.parse_args()
    path = os.path.join(args.benchmarks, "deepgemm_fp8_h800.csv")
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    out = [header("H800 SXM5 (DeepGEMM FP8 GEMMs)", "deepgemm@55ab91f")]
    for row in rows:
        t, t_bw = kernel_seconds(row)
        if abs(t_bw - t) > 0.01 * t:
            raise SystemExit(f"{path}: row {row} has TFLOPS and GB/s that disagree "
                             f"({t * 1e6:.2f} us vs {t_bw * 1e6:.2f} us)")
        out.append({"record": "gemm", "layout": row["layout"], "dtype": "fp8",
                    "num_groups": int(row["num_groups"]), "m_per_group": int(row["m_per_group"]),
                    "n": int(row["n"]), "k": int(row["k"]),
                    "measured_ns": int(round(t * 1e9)),
                    "source": f"DeepGEMM {row['layout']} {row['tflops']} TFLOPS "
                              f"({row['source'].split(' (')[0]})"})
    write_jsonl(args.out, out)


if __name__ == "__main__":
    main()
