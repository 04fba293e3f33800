#!/usr/bin/python3
"""System-level predictions of the calibrated model for DeepSeek-style units (docs/calibration.md,
"Predictions"): what the public H800 profile predicts, not fitted to any system-level figure.

- EP32 prefill unit (scenarios/units/deepseek-v3-ep32-prefill.toml): 4K prompts, 16K tokens per
  GPU per step, balanced routing. From `moesim run` over --prefill-seconds of a backlog: input
  tokens per second per node; and from `moesim layers --prefill 4096 --batches 4 --context 0`
  (one step of four 4K prompts per GPU): the same figure from the step time alone.
- EP144 decode unit (scenarios/units/deepseek-v3-ep144-decode.toml, and -mtp with MTP, k = 1,
  acceptance 0.85): `moesim layers --context 5000` at several batches (sequences per GPU): one
  decode step at a KV length of 5,000 tokens; tokens per second per node = 8 x batch x tokens per
  step / step time, per user = tokens per step / step time, where tokens per step is 1 without
  MTP and 1 + 0.85 with it (the expected accepted drafts).

Usage: scripts/predict_units.py [--build build] [--markdown]
"""
import argparse
import json
import subprocess
import sys

UNITS = "scenarios/units"


def moesim(build, *args):
    out = subprocess.run([f"{build}/apps/moesim", *args], check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--prefill-seconds", type=float, default=60.0)
    ap.add_argument("--batches", default="32,64,96,128")
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()

    prefill = f"{UNITS}/deepseek-v3-ep32-prefill.toml"
    run = moesim(a.build, "run", prefill, "--duration", str(a.prefill_seconds), "--json")
    nodes = 4
    run_per_node = run["throughput"]["input_tokens_per_s"] / nodes
    layers = moesim(a.build, "layers", prefill, "--prefill", "4096", "--batches", "4",
                    "--context", "0", "--json")
    rows = []
    for r in layers[:1]:  # the scenario's routing is uniform: both rows are the same step
        step_s = r["step_ms"] / 1e3
        per_node = 8 * 4 * 4096 / step_s
        rows.append((r["routing"], r["step_ms"], r["moe_layer_us"], r["compute_max_us_per_layer"],
                     r["comm_us_per_layer"], per_node))

    decode = []
    for name, tokens_per_step in (("deepseek-v3-ep144-decode", 1.0),
                                  ("deepseek-v3-ep144-decode-mtp", 1.85)):
        out = moesim(a.build, "layers", f"{UNITS}/{name}.toml", "--batches", a.batches,
                     "--context", "5000", "--json")
        for r in out:
            step_s = r["step_ms"] / 1e3
            b = r["seqs_per_gpu"]
            decode.append((name, r["routing"], b, r["step_ms"], tokens_per_step,
                           8 * b * tokens_per_step / step_s, tokens_per_step / step_s))

    p = print
    if a.markdown:
        p(f"EP32 prefill unit, `moesim run` over {a.prefill_seconds:g} s of a backlog: "
          f"{run_per_node:,.0f} input tokens/s per node "
          f"({run['throughput']['input_tokens_per_s']:,.0f} over 4 nodes).\n")
        p("| routing | step ms (4 x 4K prompts per GPU) | MoE layer us | compute us | a2a us "
          "| input tokens/s per node |")
        p("| --- | --- | --- | --- | --- | --- |")
        for r in rows:
            p(f"| {r[0]} | {r[1]:,.1f} | {r[2]:,.0f} | {r[3]:,.0f} | {r[4]:,.0f} | {r[5]:,.0f} |")
        p("\nEP144 decode unit, KV 5,000 tokens per sequence:\n")
        p("| scenario | routing | sequences per GPU | step ms | tokens per step "
          "| output tokens/s per node | tokens/s per user |")
        p("| --- | --- | --- | --- | --- | --- | --- |")
        for d in decode:
            p(f"| `{d[0]}` | {d[1]} | {d[2]} | {d[3]:.2f} | {d[4]:.2f} | {d[5]:,.0f} "
              f"| {d[6]:.1f} |")
    else:
        p(f"prefill run: {run_per_node:.0f} input tok/s per node")
        for r in rows:
            p(f"prefill layers {r[0]}: step {r[1]:.1f} ms, {r[5]:.0f} input tok/s per node")
        for d in decode:
            p(f"{d[0]} {d[1]} batch {d[2]}: step {d[3]:.2f} ms, {d[5]:.0f} tok/s per node, "
              f"{d[6]:.1f} tok/s per user")
    return 0


if __name__ == "__main__":
    sys.exit(main())
