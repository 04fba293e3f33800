#!/usr/bin/python3
"""Converts FlashAttention-3's published forward speeds into prefill `attention_core` records.

Input: flashattention3_h100.csv (profiles/h800-public.validation/, README.md there: the figure it
is read from and the benchmark's definitions). Output: a measurement file
(docs/schemas/measurement.md) that `moesim calibrate --topology` fits into the profile's
[compute] prefill attention cores (docs/calibration.md, "Public profile: compute").

FlashAttention-3 reports TFLOPS = FLOPs / time with FLOPs = 4 x seqlen^2 x head_dim x heads per
sequence (QK^T and PV, 2 per multiply-accumulate), halved with the causal mask; batch x seqlen =
16,384 tokens, heads x head_dim = 2,048. So each row is one kernel of 16,384 query tokens that
attend seqlen / 2 keys each (causal; seqlen without the mask), timed at FLOPs / rate. Records
carry `queries` (16,384) and `pairs` (queries x keys per query): the fit reads a fixed cost per
query from how the rate rises with the keys a query attends. Bytes: Q, K, V read and O written
once in 16-bit (4 x 16,384 x 2,048 x 2 B; the kernel is compute-bound at these lengths).

Converted (serving prefill is causal): the causal rows, as
- attn_gqa_prefill: head dim 128 (every GQA card shipped: Qwen3, Mixtral);
- attn_mla_prefill: head dims 128 and 256. MLA's prefill core runs in MHA mode (q/k head dim
  192, v 128: 2 x (192 + 128) = 640 FLOPs per (query, key) pair and head, between 512 at head
  dim 128 and 1,024 at 256), which FlashAttention-3's figure does not show: the two bracketing
  head dims are fitted together.
The rows are FP16 on H100 SXM5: the same tensor-core rate as BF16 (989.4 TFLOPS dense), and the
H800 has the H100's compute die and HBM (it differs in NVLink only), so the rates apply to the
H800 profile as BF16. Non-causal and head dim 64 rows stay in the table for comparison
(scripts/compare_compute.py).

usage: scripts/flashattention_to_measurements.py -o OUT.jsonl [--table CSV]
"""
import argparse
import csv
import os

from published_measurements import header, write_jsonl

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TABLE = os.path.join(ROOT, "profiles", "h800-public.validation", "flashattention3_h100.csv")

# Op kind -> head dims whose causal rows it is fitted on.
KINDS = {"attn_gqa_prefill": (128,), "attn_mla_prefill": (128, 256)}


def kernel(row):
    """(FLOPs, bytes, queries, pairs, seconds) of one table row."""
    d, s, b, h = (int(row[c]) for c in ("head_dim", "seqlen", "batch", "heads"))
    causal = row["causal"] == "true"
    queries = b * s
    pairs = queries * (s // 2 if causal else s)
    flops = 4.0 * pairs * d * h
    bytes_ = 4.0 * queries * h * d * 2
    return flops, bytes_, queries, pairs, flops / (float(row["tflops"]) * 1e12)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-o", "--out", required=True)
    p.add_argument("--table", default=TABLE)
    args = p.parse_args()
    with open(args.table, newline="") as f:
        rows = list(csv.DictReader(f))
    out = [header("H100 SXM5 (FlashAttention-3 forward)", "flash-attention@7ef2484")]
    for kind, dims in KINDS.items():
        for row in rows:
            if row["causal"] != "true" or int(row["head_dim"]) not in dims:
                continue
            assert row["dtype"] == "fp16" and int(row["batch"]) * int(row["seqlen"]) == 16384
            flops, bytes_, queries, pairs, t = kernel(row)
            out.append({"record": "attention_core", "op": kind, "dtype": "bf16",
                        "bound": "compute", "flops": flops, "bytes": bytes_,
                        "queries": queries, "pairs": pairs,
                        "measured_ns": int(round(t * 1e9)),
                        "source": f"FlashAttention-3 fwd causal head dim {row['head_dim']} "
                                  f"seqlen {row['seqlen']} {row['tflops']} TFLOPS"})
    write_jsonl(args.out, out)


if __name__ == "__main__":
    main()
