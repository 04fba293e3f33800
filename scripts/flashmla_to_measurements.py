#!/usr/bin/python3
"""Converts FlashMLA's published decode figures into `attention_core` measurement records.

Input: flashmla_h800.csv (../shared/data/benchmarks/, whose README.md names the source). Output:
a measurement file (docs/schemas/measurement.md) that `moesim calibrate --topology` fits into
the profile's [compute] attention cores (docs/calibration.md, "Public profile: compute").

FlashMLA publishes rates, not kernel times ("up to" figures of its benchmark). Each decode figure
becomes one kernel of DeepSeek-V3's MLA decode (kv_lora_rank 512, qk_rope 64: a cache row of 576
values; FLOPs 2 x heads x (2 x 512 + 64) per query and attended token, moesim's and FlashMLA's
count alike) at a shape where that figure is the binding limit, timed at the published rate:
- dense_mla_decode memory_bound (GB/s, BF16): 128 sequences x 4,096 cached tokens, 16 query
  heads (DeepSeek-V3's 128 heads over TP8, FlashMLA's memory-bound setting), one query token;
  bytes = the BF16 cache read, 128 x 4,096 x 1,152 B; time = bytes / rate. (At 16 heads the
  kernel does 30 FLOPs per byte: far below the 220 FLOPs per byte where 660 TFLOPS and 3,000
  GB/s cross.)
- dense_mla_decode compute_bound (TFLOPS, BF16): 128 sequences x 4,096 tokens, 128 heads, two
  query tokens (MTP); time = FLOPs / rate (484 FLOPs per byte).
The sparse figures (sparse_fp8_mla_decode, sparse_mla_prefill: DeepSeek-V3.2's sparse attention
over selected tokens; the FP8 decode kernel reads an FP8 cache but multiplies in BF16, FlashMLA's
README says) are not kernels of DeepSeek-V3's dense attention and are not converted: an FP8 core
takes no rate from them (docs/calibration.md, "Where no fit applies"). Nor is the FP8 KV format
row (its size is checked by tests/sim/calibration/public_profile_compute_test.cc against the
model card).

usage: scripts/flashmla_to_measurements.py -o OUT.jsonl [--benchmarks DIR]
"""
import argparse
import csv
import os

from published_measurements import header, write_jsonl

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

LORA, ROPE = 512, 64
FLOPS_PER_HEAD_TOKEN = 2 * (2 * LORA + ROPE)  # per query token, head and attended token


def kernel(batch, q_tokens, heads, context, row_bytes):
    flops = batch * q_tokens * heads * FLOPS_PER_HEAD_TOKEN * context
    bytes_ = batch * context * row_bytes
    return flops, bytes_


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-o", "--out", required=True)
    p.add_argument("--benchmarks", default=os.path.join(ROOT, "..", "shared", "data", "benchmarks"))
    args = p.parse_args()
    path = os.path.join(args.benchmarks, "flashmla_h800.csv")
    with open(path, newline="") as f:
        rows = {(r["kernel"], r["regime"]): r for r in csv.DictReader(f)}
    out = [header("H800 SXM5 (FlashMLA decode)", "flashmla@9241ae3e")]
    bf16_row = (LORA + ROPE) * 2
    specs = [
        (("dense_mla_decode", "memory_bound"), "bf16", "memory", kernel(128, 1, 16, 4096, bf16_row)),
        (("dense_mla_decode", "compute_bound"), "bf16", "compute",
         kernel(128, 2, 128, 4096, bf16_row)),
    ]
    for key, dtype, bound, (flops, bytes_) in specs:
        row = rows[key]
        value = float(row["value"])
        if bound == "memory":
            assert row["unit"] == "GB/s", row
            t = bytes_ / (value * 1e9)
        else:
            assert row["unit"] == "TFLOPS", row
            t = flops / (value * 1e12)
        out.append({"record": "attention_core", "op": "attn_mla_decode", "dtype": dtype,
                    "bound": bound, "flops": float(flops), "bytes": float(bytes_),
                    "measured_ns": int(round(t * 1e9)),
                    "source": f"FlashMLA {key[0]} {key[1]} {row['value']} {row['unit']}"})
    write_jsonl(args.out, out)


if __name__ == "__main__":
    main()
