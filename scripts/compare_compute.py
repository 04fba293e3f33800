#!/usr/bin/python3
"""Validation report of a profile's [compute] section against DeepGEMM's, FlashMLA's and
FlashAttention-3's tables.

For every DeepGEMM row: the published TFLOPS, moesim's (the row's FLOPs over the time the
profile's GEMM fit of its layout gives, on the profile's GPU peaks) and the error; the same for
DeepSeek-V3's expert FFN (gate/up n = 4096, k = 7168 then down n = 7168, k = 2048: the table's
pairs) composed as the calibrated cost model composes it. For FlashMLA's dense decode figures:
the rate of the profile's attention-core fit on the kernels scripts/flashmla_to_measurements.py
describes; its sparse FP8 figure (not fitted) beside the rate moesim gives that kernel's FLOPs
by the BF16 rule; the FP8 KV format size against moesim's MLA cache bytes at kv_cache = "fp8".
For FlashAttention-3's causal rows (scripts/flashattention_to_measurements.py): the rate of the
prefill core fit of each kind fitted on them, and its rate on the non-causal rows (not fitted).
The formulas are those of sim/cost/compute_calibration.h; tests/sim/calibration/
public_profile_compute_test.cc asserts the same rows through the C++ code.

usage: scripts/compare_compute.py [--profile profiles/h800-public.toml] [--benchmarks DIR]
                                  [--tables DIR]
"""
import argparse
import csv
import os
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# Datasheet peaks of the catalogue (sim/topology/gpu_spec.cc): fp8, bf16 FLOP/s, HBM bytes/s.
PEAKS = {"h800-sxm": (1978.9e12, 989.4e12, 3.35e12), "h100-sxm": (1978.9e12, 989.4e12, 3.35e12),
         "h200-sxm": (1978.9e12, 989.4e12, 4.8e12)}
# DeepSeek-V3's MLA latent and RoPE widths (the FlashMLA figures' kernels).
LORA, ROPE = 512, 64


def gemm_seconds(fit, g, m, n, k, peak, hbm, b=1.0):
    rows = g * m
    flops = 2.0 * rows * n * k
    inp = rows * k * b + g * n * k * b
    out = 2.0 * rows * n
    return (flops / (peak * fit["compute_efficiency"]) +
            inp / (hbm * fit["input_bandwidth_efficiency"]) +
            out / (hbm * fit["output_bandwidth_efficiency"]))


def pct(x):
    return f"{100 * x:+.1f}%"


def load_compute(profile):
    """The profile's [compute] section and its GPU's peaks (fp8, bf16 FLOP/s, HBM bytes/s)."""
    with open(profile, "rb") as f:
        comp = tomllib.load(f)["compute"]
    return comp, PEAKS[comp["gpu"]]


def deepgemm_rows(comp, benchmarks):
    """One dict per DeepGEMM table row: its shape, the published TFLOPS, moesim's TFLOPS (the
    row's FLOPs over the time the GEMM fit of its layout gives) and both kernel times in s."""
    fp8, _, hbm = PEAKS[comp["gpu"]]
    fits = {(g["layout"], g["dtype"]): g for g in comp.get("gemm", [])}
    with open(os.path.join(benchmarks, "deepgemm_fp8_h800.csv"), newline="") as f:
        table = list(csv.DictReader(f))
    rows = []
    for r in table:
        g, m, n, k = (int(r[c]) for c in ("num_groups", "m_per_group", "n", "k"))
        s = gemm_seconds(fits[(r["layout"], "fp8")], g, m, n, k, fp8, hbm)
        flops = 2.0 * g * m * n * k
        rows.append({"layout": r["layout"], "groups": g, "m": m, "n": n, "k": k,
                     "published_tflops": float(r["tflops"]), "moesim_tflops": flops / s / 1e12,
                     "published_s": flops / (float(r["tflops"]) * 1e12), "moesim_s": s})
    return rows


def core_seconds(a, flops, bytes_, peak, hbm, queries=0, pairs=0):
    """An attention core by its fit (AttentionCoreFit::seconds), beyond the most keys per query
    fitted at the rate of the most (the calibrated cost model's rule)."""
    if pairs > 0 and "keys_per_query" in a:
        pairs = min(pairs, queries * a["keys_per_query"][1])
    overhead = a.get("query_overhead_keys", 0) * queries / pairs if pairs > 0 else 0
    return max(flops * (1 + overhead) / (peak * a["compute_efficiency"]),
               bytes_ / (hbm * a["bandwidth_efficiency"]))


def flashmla_rows(comp, benchmarks, fitted=True):
    """One dict per FlashMLA decode figure: the kernel, regime, dtype, unit, the shape it is
    read at, the published rate and the rate of the profile's attention-core fit on that shape.
    fitted: the two dense figures the profile was fitted on; else the sparse FP8 figure, which is
    not (a sparse kernel with BF16 math), priced as moesim prices an FP8 core of its FLOPs and
    bytes: by the BF16 dense fit (docs/calibration.md, "Where no fit applies")."""
    _, bf16, hbm = PEAKS[comp["gpu"]]
    with open(os.path.join(benchmarks, "flashmla_h800.csv"), newline="") as f:
        mla = {(r["kernel"], r["regime"]): r for r in csv.DictReader(f)}
    cores = {(a["kind"], a["dtype"]): a for a in comp.get("attention_core", [])}
    if fitted:
        cases = [("dense_mla_decode", "memory_bound", "bf16", 1, 16, 4096, (LORA + ROPE) * 2,
                  "GB/s", "16 heads, 1 query token, 4,096 cached, BF16 cache"),
                 ("dense_mla_decode", "compute_bound", "bf16", 2, 128, 4096, (LORA + ROPE) * 2,
                  "TFLOPS", "128 heads, 2 query tokens, 4,096 cached")]
    else:
        cases = [("sparse_fp8_mla_decode", "compute_bound", "fp8", 2, 128, 2048,
                  int(mla[("fp8_kv_cache", "format")]["value"]), "TFLOPS",
                  "128 heads, 2 query tokens, 2,048 selected, FP8 cache")]
    rows = []
    for kernel, regime, dtype, q, heads, ctx, row_bytes, unit, what in cases:
        a = cores[("attn_mla_decode", "bf16")]
        flops = 128.0 * q * heads * 2 * (2 * LORA + ROPE) * ctx
        bytes_ = 128.0 * ctx * row_bytes
        s = core_seconds(a, flops, bytes_, bf16, hbm)
        rate = bytes_ / s / 1e9 if unit == "GB/s" else flops / s / 1e12
        rows.append({"kernel": kernel, "regime": regime, "dtype": dtype, "unit": unit,
                     "shape": what, "published": float(mla[(kernel, regime)]["value"]),
                     "moesim": rate})
    fmt = int(mla[("fp8_kv_cache", "format")]["value"])
    return rows, fmt


# FlashAttention-3 rows -> the prefill kinds fitted on them, by head dim
# (scripts/flashattention_to_measurements.py).
FA3_KINDS = {128: ("attn_gqa_prefill", "attn_mla_prefill"), 256: ("attn_mla_prefill",)}


def flashattention_rows(comp, tables, fitted=True):
    """One dict per (FlashAttention-3 row, prefill kind fitted on its head dim): the kind, the
    row's setting, the published TFLOPS and the rate of the kind's prefill core fit on that
    kernel. fitted: the causal rows (the fits' inputs); else the non-causal ones (not fitted)."""
    _, bf16, hbm = PEAKS[comp["gpu"]]
    cores = {(a["kind"], a["dtype"]): a for a in comp.get("attention_core", [])}
    with open(os.path.join(tables, "flashattention3_h100.csv"), newline="") as f:
        table = list(csv.DictReader(f))
    rows = []
    for r in table:
        d, s, b, h = (int(r[c]) for c in ("head_dim", "seqlen", "batch", "heads"))
        causal = r["causal"] == "true"
        if causal != fitted:
            continue
        for kind in FA3_KINDS.get(d, ()):
            queries = b * s
            pairs = queries * (s // 2 if causal else s)
            flops = 4.0 * pairs * d * h
            bytes_ = 4.0 * queries * h * d * 2
            t = core_seconds(cores[(kind, "bf16")], flops, bytes_, bf16, hbm, queries, pairs)
            rows.append({"kind": kind, "head_dim": d, "seqlen": s, "causal": causal,
                         "keys_per_query": pairs // queries, "published": float(r["tflops"]),
                         "moesim": flops / t / 1e12})
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--profile", default=os.path.join(ROOT, "profiles", "h800-public.toml"))
    p.add_argument("--benchmarks", default=os.path.join(ROOT, "..", "shared", "data", "benchmarks"))
    p.add_argument("--tables", default=os.path.join(ROOT, "profiles", "h800-public.validation"),
                   help="where flashattention3_h100.csv is")
    args = p.parse_args()
    comp, (fp8, bf16, hbm) = load_compute(args.profile)
    print(f"Profile `{os.path.basename(args.profile)}`, GPU {comp['gpu']} (FP8 {fp8 / 1e12:.1f} "
          f"TFLOPS, BF16 {bf16 / 1e12:.1f} TFLOPS, HBM {hbm / 1e9:.0f} GB/s). In sample: the rows "
          "are the fit's inputs.\n")
    print("GEMM fits (seconds = FLOPs / (peak x compute) + input bytes / (HBM x input) + output "
          "bytes / (HBM x output)):\n")
    print("| layout | dtype | compute eff. | input bw eff. | output bw eff. | rows per group |")
    print("| --- | --- | --- | --- | --- | --- |")
    for g in comp.get("gemm", []):
        print(f"| {g['layout']} | {g['dtype']} | {g['compute_efficiency']:.3f} | "
              f"{g['input_bandwidth_efficiency']:.3f} | {g['output_bandwidth_efficiency']:.3f} | "
              f"{g['m_per_group'][0]:.0f}-{g['m_per_group'][1]:.0f} |")
    print("\nDeepGEMM rows (TFLOPS; error = moesim / published - 1):\n")
    print("| layout | groups | m per group | n | k | published | moesim | error |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    worst = 0.0
    times = {}
    for r in deepgemm_rows(comp, args.benchmarks):
        err = r["moesim_tflops"] / r["published_tflops"] - 1
        worst = max(worst, abs(err))
        times[(r["layout"], r["groups"], r["m"], r["n"])] = (r["published_s"], r["moesim_s"])
        print(f"| {r['layout']} | {r['groups']} | {r['m']} | {r['n']} | {r['k']} | "
              f"{r['published_tflops']:.0f} | {r['moesim_tflops']:.0f} | {pct(err)} |")
    print(f"\nWorst row: {100 * worst:.1f}%.\n")
    print("DeepSeek-V3 FFN = gate/up (n 4096, k 7168) + down (n 7168, k 2048), kernel time "
          "(error = moesim / published - 1; routed experts for the grouped layouts, the shared "
          "expert for dense):\n")
    print("| layout | groups | m per group | published us | moesim us | error |")
    print("| --- | --- | --- | --- | --- | --- |")
    for (layout, g, m, n), (pub, sim) in times.items():
        if n != 4096:
            continue
        pub2, sim2 = times[(layout, g, m, 7168)]
        print(f"| {layout} | {g} | {m} | {1e6 * (pub + pub2):.1f} | {1e6 * (sim + sim2):.1f} | "
              f"{pct((sim + sim2) / (pub + pub2) - 1)} |")
    print("\nFlashMLA (DeepSeek-V3 MLA decode core, 128 sequences; moesim = the attention-core "
          "fit's rate on that kernel):\n")
    print("| figure | kernel | published | moesim | error |")
    print("| --- | --- | --- | --- | --- |")
    mla, fmt = flashmla_rows(comp, args.benchmarks)
    sparse, _ = flashmla_rows(comp, args.benchmarks, fitted=False)
    for r in mla + sparse:
        fitted = "" if r in mla else " (not fitted: sparse kernel; moesim's BF16 rule)"
        print(f"| {r['kernel']} {r['regime']} ({r['dtype']}){fitted} | {r['shape']} | "
              f"{r['published']:.0f} {r['unit']} | {r['moesim']:.0f} {r['unit']} | "
              f"{pct(r['moesim'] / r['published'] - 1)} |")
    print(f"| fp8_kv_cache format | bytes per token and layer | {fmt} B | {LORA + ROPE} B "
          f"(kv_cache = \"fp8\": 576 FP8 values, no scales, FP8 RoPE) | "
          f"{pct((LORA + ROPE) / fmt - 1)} |")
    print("\nPrefill attention-core fits (seconds = core FLOPs x (1 + query_overhead_keys x "
          "queries / pairs) / (peak x compute); in range between the fitted keys per query):\n")
    print("| kind | dtype | compute eff. | query overhead (keys) | keys per query | samples | "
          "MAPE | worst |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for a in comp.get("attention_core", []):
        if "keys_per_query" not in a:
            continue
        q = a["quality"]
        print(f"| {a['kind']} | {a['dtype']} | {a['compute_efficiency']:.3f} | "
              f"{a['query_overhead_keys']:.0f} | {a['keys_per_query'][0]:.0f}-"
              f"{a['keys_per_query'][1]:.0f} | {q['num_samples']} | {100 * q['mape']:.1f}% | "
              f"{100 * q['p99_abs_rel_error']:.1f}% |")
    print("\nFlashAttention-3 forward, H100 SXM5, 16K tokens per kernel (TFLOPS; error = moesim / "
          "published - 1). Causal rows: the fits' inputs; non-causal rows: not fitted, priced by "
          "the causal fits (no masked diagonal: the kernel is faster than they say at short "
          "lengths):\n")
    print("| kind | head dim | mask | seqlen | keys per query | published | moesim | error |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in flashattention_rows(comp, args.tables) + flashattention_rows(comp, args.tables, False):
        print(f"| {r['kind']} | {r['head_dim']} | {'causal' if r['causal'] else 'none'} | "
              f"{r['seqlen']} | {r['keys_per_query']} | {r['published']:.0f} | "
              f"{r['moesim']:.0f} | {pct(r['moesim'] / r['published'] - 1)} |")


if __name__ == "__main__":
    main()
