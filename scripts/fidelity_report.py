#!/usr/bin/python3
"""Regenerates the tables of docs/fidelity.md (the fidelity report) from a build's moesim binary.

Two groups of public figures:
- fitted (in sample): every kernel-table row the public H800 profile was fitted from (the
  measurement files its `measurements` key names): DeepEP V1 normal and low-latency rows through
  `moesim collective` (scripts/compare_deepep.py), DeepGEMM, FlashMLA and FlashAttention-3 rows
  through the profile's [compute] fits (scripts/compare_compute.py, the formulas of the C++ cost model that
  tests/sim/calibration/public_profile_compute_test.cc pins);
- held out: system-level throughput figures of deployed systems (DeepSeek's production fleet and
  profile, SGLang's 96-GPU H100 deployment), never used to fit a parameter or choose a schedule,
  each priced by `moesim run` / `moesim layers` on the shipped DeepSeek-V3 units
  (scenarios/units/), or on a copy of one with the figure's setting (GPU count, hardware, MTP
  acceptance, placement) written into a temporary scenario. Figures moesim cannot express are
  listed with the reason.

The figures are simulated time: they do not depend on the machine that runs the script.

Writes the generated blocks of docs/fidelity.md (between its `<!-- BEGIN fidelity_report.py:
NAME -->` / `<!-- END ... -->` markers) and README.md's held-out line; --check compares instead
and exits 1 when they differ from what the build gives. --fast takes a few rows only (< 20 s;
registered in ctest as `scripts.fidelity_report_fast`): with --check each of them must appear,
identical, in the document's tables; without it they are printed.

usage: scripts/fidelity_report.py [--moesim build/apps/moesim] [--check] [--fast]
                                  [--doc docs/fidelity.md] [--readme README.md]
"""
import argparse
import csv
import difflib
import json
import os
import re
import subprocess
import sys
import tempfile
import tomllib
from types import SimpleNamespace

import tomli_w

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from compare_compute import (deepgemm_rows, flashattention_rows, flashmla_rows,  # noqa: E402
                             load_compute)
from compare_deepep import run_ll_row, run_row  # noqa: E402

PROFILE = os.path.join(ROOT, "profiles", "h800-public.toml")
TABLES = os.path.join(ROOT, "profiles", "h800-public.validation")  # the fit's input tables
UNITS = os.path.join(ROOT, "scenarios", "units")
GPUS_PER_NODE = 8

# Sources: the references at the end of docs/fidelity.md.
DS_DAY6 = "DeepSeek day 6 [1]"
DS_PROFILE = "DeepSeek profile-data [2], per node as SGLang [3] converts it"
SGLANG = "SGLang on 96 H100 [3]"
UCCL = "UCCL-EP on p5en [4]"


def pct(x):
    """A signed relative error in percent; 0.0% when it rounds to zero."""
    return "0.0%" if abs(x) < 0.0005 else f"{100 * x:+.1f}%"


def num(x):
    """A figure at the precision the tables show: thousands separators, 3 significant digits
    below 100."""
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.3g}"


class Moesim:
    """Runs the moesim binary (JSON outputs), caching identical calls, and writes scenario
    variants into a temporary directory."""

    def __init__(self, binary, tmp):
        self.binary = binary
        self.tmp = tmp
        self.cache = {}

    def json(self, *args):
        if args not in self.cache:
            out = subprocess.run([self.binary, *args, "--json"], check=True, capture_output=True,
                                 text=True).stdout
            self.cache[args] = json.loads(out)
        return self.cache[args]

    def variant(self, base, name, changes=None, drops=(), topology_nodes=None):
        """A copy of scenario `base` (a file name under scenarios/units/) as `name`.toml in the
        temporary directory: `changes` maps "table.key" to a value, `drops` removes keys, paths
        are made absolute; with `topology_nodes`, the topology file (after `changes`) is copied
        with that many nodes."""
        path = os.path.join(UNITS, base)
        with open(path, "rb") as f:
            sc = tomllib.load(f)
        sc["model"] = os.path.normpath(os.path.join(UNITS, sc["model"]))
        sc["topology"] = os.path.normpath(os.path.join(UNITS, sc["topology"]))
        sc["cost"]["profile"] = os.path.normpath(os.path.join(UNITS, sc["cost"]["profile"]))
        for key, value in (changes or {}).items():
            table, _, leaf = key.rpartition(".")
            node = sc
            for part in filter(None, table.split(".")):
                node = node.setdefault(part, {})
            node[leaf] = value
        for key in drops:
            table, _, leaf = key.rpartition(".")
            node = sc
            for part in filter(None, table.split(".")):
                node = node[part]
            del node[leaf]
        if topology_nodes is not None:
            with open(sc["topology"], "rb") as f:
                topo = tomllib.load(f)
            topo["network"]["num_nodes"] = topology_nodes
            topo_path = os.path.join(self.tmp, f"{name}.topology.toml")
            with open(topo_path, "wb") as f:
                tomli_w.dump(topo, f)
            sc["topology"] = topo_path
        out = os.path.join(self.tmp, f"{name}.toml")
        with open(out, "wb") as f:
            tomli_w.dump(sc, f)
        return out


def tokens_per_step(scenario):
    """Tokens per sequence one decode step yields: 1, or with [speculative] 1 + the expected
    accepted drafts (sum over i of the product of the first i conditional acceptances;
    docs/scenarios.md, `acceptance` / `acceptance_rate`)."""
    with open(scenario, "rb") as f:
        spec = tomllib.load(f).get("speculative")
    if not spec:
        return 1.0
    k = spec["draft_tokens"]
    rates = spec["acceptance"] if "acceptance" in spec else [spec["acceptance_rate"]] * k
    total, run = 1.0, 1.0
    for a in rates[:k]:
        run *= a
        total += run
    return total


def layers_row(ms, scenario, routing, batches, context, prefill=None):
    args = ["layers", scenario, "--batches", str(batches), "--context", str(context)]
    if prefill:
        args += ["--prefill", str(prefill)]
    return next(r for r in ms.json(*args) if r["routing"] == routing)


def prefill_per_node(ms, scenario, routing, prompt, prompts_per_gpu):
    """Input tokens/s per node of one prefill step of `prompts_per_gpu` prompts per GPU."""
    r = layers_row(ms, scenario, routing, prompts_per_gpu, 0, prefill=prompt)
    return GPUS_PER_NODE * prompts_per_gpu * prompt / (r["step_ms"] / 1e3)


def decode_per_node(ms, scenario, routing, batch, context):
    """Output tokens/s per node of one decode step at `batch` sequences per GPU."""
    r = layers_row(ms, scenario, routing, batch, context)
    return GPUS_PER_NODE * batch * tokens_per_step(scenario) / (r["step_ms"] / 1e3)


def run_per_node(ms, scenario, seconds):
    """Input tokens/s per node of `moesim run` over `seconds` of the scenario's backlog."""
    with open(scenario, "rb") as f:
        gpus = tomllib.load(f)["deployment"]["gpus_per_replica"]
    run = ms.json("run", scenario, "--duration", str(seconds))
    return run["throughput"]["input_tokens_per_s"] / (gpus / GPUS_PER_NODE)


# ---------------------------------------------------------------------------------------------
# Fitted (in-sample) rows: (source, setting, published, moesim, unit, higher_is_faster)


def fitted_deepep(ms, fast):
    args = SimpleNamespace(moesim=ms.binary, profile=PROFILE, no_node_limit=False,
                           topology=os.path.join(ROOT, "topologies", "h800-8x8.toml"),
                           ll_topology=os.path.join(ROOT, "topologies", "h800-128x8.toml"))
    rows = []
    with open(os.path.join(TABLES, "deepep_v1_normal_h800.csv"), newline="") as f:
        normal = list(csv.DictReader(f))
    for r in normal:
        if fast and (r["ep"], r["phase"]) != ("32", "dispatch"):
            continue
        logical, _, _ = run_row(args, r)
        rows.append(("DeepEP V1 normal", f"{r['phase']} EP{r['ep']} ({r['scope']}), 4,096 "
                     "tokens per GPU, bottleneck bandwidth",
                     float(r["bottleneck_gbytes_per_s"]), logical, "GB/s", True))
    return rows


def fitted_deepep_ll(ms, fast):
    args = SimpleNamespace(moesim=ms.binary, profile=PROFILE,
                           ll_topology=os.path.join(ROOT, "topologies", "h800-128x8.toml"))
    rows = []
    with open(os.path.join(TABLES, "deepep_v1_low_latency_h800.csv"), newline="") as f:
        table = list(csv.DictReader(f))
    for r in table:
        if fast and (r["table"], r["ep"], r["phase"]) != ("current_with_nvlink", "32",
                                                          "dispatch"):
            continue
        latency, _ = run_ll_row(args, r)
        what = "NVLink where possible" if r["table"] == "current_with_nvlink" else "pure RDMA"
        rows.append((f"DeepEP V1 low-latency ({what})",
                     f"{r['phase']} EP{r['ep']}, 128 tokens per GPU, kernel latency",
                     float(r["latency_us"]), latency, "us", False))
    return rows


def fitted_deepgemm(ms, fast):
    comp, _ = load_compute(PROFILE)
    rows = []
    for r in deepgemm_rows(comp, TABLES):
        if fast and (r["layout"], r["m"], r["n"]) != ("masked_grouped", 256, 4096):
            continue
        rows.append(("DeepGEMM FP8", f"{r['layout']}, {r['groups']} x {r['m']} rows, n "
                     f"{r['n']}, k {r['k']}", r["published_tflops"], r["moesim_tflops"],
                     "TFLOPS", True))
    return rows


def fitted_flashmla(ms, fast):
    comp, _ = load_compute(PROFILE)
    mla, _ = flashmla_rows(comp, TABLES)
    rows = []
    for r in mla:
        if fast and r["regime"] != "compute_bound":
            continue
        rows.append(("FlashMLA", f"{r['kernel']} {r['regime']} ({r['dtype']}): {r['shape']}",
                     r["published"], r["moesim"], r["unit"], True))
    return rows


def fitted_flashattention(ms, fast):
    comp, _ = load_compute(PROFILE)
    rows = []
    for r in flashattention_rows(comp, TABLES):
        if fast and (r["kind"], r["head_dim"], r["seqlen"]) != ("attn_mla_prefill", 128, 4096):
            continue
        rows.append(("FlashAttention-3 (H100)", f"{r['kind']} core: causal, head dim "
                     f"{r['head_dim']}, seqlen {r['seqlen']}, 16K tokens", r["published"],
                     r["moesim"], "TFLOPS", True))
    return rows


# The profile's measurement files and the rows each was converted from.
FITTED = {
    "deepep-normal.meas.jsonl": fitted_deepep,
    "deepep-low-latency.meas.jsonl": fitted_deepep_ll,
    "deepgemm.meas.jsonl": fitted_deepgemm,
    "flashmla.meas.jsonl": fitted_flashmla,
    "flashattention.meas.jsonl": fitted_flashattention,
}


# ---------------------------------------------------------------------------------------------
# Held-out rows. Each: source, setting, published, unit, moesim (a function of Moesim),
# likeness (close / partial / loose: what differs), profile, fast.

# DeepSeek day 6: 14.8K output tokens/s per node at 20-22 tokens/s per user: 14,800 / 8 / 21.
DS_DECODE_BATCH = round(14_800 / GPUS_PER_NODE / 21)


def ds6_prefill(ms):
    return run_per_node(ms, os.path.join(UNITS, "deepseek-v3-ep32-prefill.toml"), 60)


def ds6_decode(ms):
    return decode_per_node(ms, os.path.join(UNITS, "deepseek-v3-ep144-decode-mtp.toml"),
                           "scenario", DS_DECODE_BATCH, 4989)


def profile_prefill(ms):
    return prefill_per_node(ms, os.path.join(UNITS, "deepseek-v3-ep32-prefill.toml"), "uniform",
                            4096, 4)


def profile_decode(ms):
    sc = ms.variant("deepseek-v3-ep144-decode-mtp.toml", "profile-decode-ep128",
                    {"deployment.gpus_per_replica": 128, "speculative.acceptance": [0.6]},
                    drops=("deployment.placement", "deployment.redundant_slots"))
    return decode_per_node(ms, sc, "uniform", 128, 4096)


def h100(changes=None):
    c = {"topology": os.path.join(ROOT, "topologies", "h100-8x8.toml"),
         "cost.profile": os.path.join(ROOT, "profiles", "h100-derived.toml")}
    c.update(changes or {})
    return c


def sglang_prefill_balanced(ms):
    sc = ms.variant("deepseek-v3-ep32-prefill.toml", "sglang-prefill-h100", h100())
    return prefill_per_node(ms, sc, "uniform", 4096, 4)


def sglang_prefill_eplb(prompt):
    def price(ms):
        sc = ms.variant("deepseek-v3-ep32-prefill.toml", "sglang-prefill-h100-eplb",
                        h100({"deployment.placement": "eplb", "deployment.redundant_slots": 32,
                              "routing": {"preset": "deepseek-v3-decode"}}))
        return prefill_per_node(ms, sc, "scenario", prompt, 16384 // prompt)
    return price


def sglang_decode(ms):
    sc = ms.variant("deepseek-v3-ep144-decode.toml", "sglang-decode-h100-ep72",
                    h100({"deployment.gpus_per_replica": 72}), topology_nodes=9)
    return decode_per_node(ms, sc, "scenario", 256, 2000)


PREFILL_UNIT = "`deepseek-v3-ep32-prefill`"
DECODE_MTP_UNIT = "`deepseek-v3-ep144-decode-mtp`"
HELD_OUT = [
    dict(key="ds6-prefill", source=DS_DAY6,
         setting="H800 fleet, prefill, EP32 units (4 nodes), 24-hour average; input tokens/s per "
         "node including prefix-cache hits",
         published=73_700, unit="tok/s/node", price=ds6_prefill,
         moesim=f"{PREFILL_UNIT}: `moesim run` over 60 s of a backlog of 4K prompts, 16K "
         "tokens per GPU per step, balanced routing",
         likeness="loose: 56.3% of the published input tokens were on-disk cache hits (no "
         "prefill compute; 32.2K tok/s per node without them); production load and prompt "
         "lengths vary; real routing",
         profile="h800-public", fast=False),
    dict(key="ds6-decode", source=DS_DAY6,
         setting="H800 fleet, decode, EP144 units (18 nodes), MTP, average KV length 4,989, "
         "24-hour average; output tokens/s per node",
         published=14_800, unit="tok/s/node", price=ds6_decode,
         moesim=f"{DECODE_MTP_UNIT} (EPLB, 288 slots, MTP acceptance 0.85): `moesim layers` at "
         f"{DS_DECODE_BATCH} sequences per GPU (14,800 / 8 GPUs / 21 tok/s per user, the "
         "published mean output speed), KV 4,989, skewed routing",
         likeness="partial: batch derived from the published per-user speed; MTP acceptance "
         "not published (0.85 from the V3 report); production load varies step to step",
         profile="h800-public", fast=True),
    dict(key="profile-prefill", source=DS_PROFILE,
         setting="H800, EP32, 4K prompts, 16,384 tokens per GPU, two micro-batches, balanced "
         "routing; input tokens/s per node",
         published=62_713, unit="tok/s/node", price=profile_prefill,
         moesim=f"{PREFILL_UNIT}: `moesim layers` one step of four 4K prompts per GPU, uniform "
         "routing",
         likeness="close: the unit is this profile's setting; the figure is SGLang's conversion "
         "of the trace's step time",
         profile="h800-public", fast=True),
    dict(key="profile-decode", source=DS_PROFILE,
         setting="H800, EP128 (16 nodes), 128 sequences per GPU, KV 4,096, MTP, balanced "
         "routing; output tokens/s per node at 60% MTP acceptance",
         published=18_598, unit="tok/s/node", price=profile_decode,
         moesim=f"{DECODE_MTP_UNIT} on 128 GPUs (2 experts per GPU, no redundant slots), "
         "acceptance 0.6: `moesim layers` at 128 sequences per GPU, KV 4,096, uniform routing",
         likeness="partial: the 60% acceptance of SGLang's conversion is inferred (the blog "
         "states it for its own MTP runs; 8 x 128 x 1.6 / 18,598 = 88 ms a step); moesim uses "
         "it too, so the row compares step times",
         profile="h800-public", fast=False),
    dict(key="sglang-prefill-balanced", source=SGLANG,
         setting="H100, 4 nodes, EP32, 4,096-token prompts, 16,384 tokens per GPU, two-batch "
         "overlap, simulated perfect EPLB; input tokens/s per node",
         published=59_337, unit="tok/s/node", price=sglang_prefill_balanced,
         moesim=f"{PREFILL_UNIT} on `h100-8x8`: `moesim layers` one step, uniform routing",
         likeness="partial: H100 profile derived from H800 by hardware ratios, not measured; "
         "SGLang's kernels, launch order and overlap, not DeepSeek's",
         profile="h100-derived", fast=False),
]
for prompt, published in ((4096, 50_302), (2048, 54_543), (1024, 57_674)):
    HELD_OUT.append(dict(
        key=f"sglang-prefill-{prompt}", source=SGLANG,
        setting=f"H100, 4 nodes, EP32, {prompt:,}-token prompts, default EPLB (fitted on the "
        "benchmark's own distribution); input tokens/s per node",
        published=published, unit="tok/s/node", price=sglang_prefill_eplb(prompt),
        moesim=f"{PREFILL_UNIT} on `h100-8x8`, EPLB with 288 slots, `deepseek-v3-decode` routing "
        f"skew: `moesim layers` one step of {16384 // prompt} prompts per GPU",
        likeness="partial: tokens per GPU stated for the 4K row only (16,384 assumed); SGLang's "
        "routing distribution unpublished (moesim's decode skew stands in); H100 profile derived",
        profile="h100-derived", fast=False))
HELD_OUT.append(dict(
    key="sglang-decode", source=SGLANG,
    setting="H100, 9 nodes, EP72, 256 sequences per GPU, KV 2,000, no MTP, EPLB, two-batch "
    "overlap; output tokens/s per node",
    published=22_282, unit="tok/s/node", price=sglang_decode,
    moesim="`deepseek-v3-ep144-decode` on 72 H100 (9 nodes of `h100-8x8`), EPLB with 288 slots: "
    "`moesim layers` at 256 sequences per GPU, KV 2,000, skewed routing",
    likeness="partial: routing distribution unpublished (moesim's decode skew); H100 profile "
    "derived; moesim runs the unit's `decode_pipeline`, not SGLang's overlap as deployed",
    profile="h100-derived", fast=False))

NOT_EXPRESSIBLE = [
    (SGLANG, "H100, 9 nodes, EP72, simulated MTP: 128 sequences, KV 4,000, attention slowed by "
     "dummy kernels to DeepSeek's profile", "17,373 tok/s/node",
     "an artificial workload (batch doubled, KV halved, attention padded to another system's "
     "timing): no model of the padding"),
    (UCCL, "SGLang v0.5.3, DeepSeek-R1, H200 with 16 x 200 Gb/s EFA per node, prefill-heavy "
     "workload, EP16 / EP32", "46K / 74K input tok/s",
     "no EFA transport (SRD, 16 NICs per node, per-message cost); the workload and whether the "
     "figure is per node are not stated"),
    ("DeepSeek profile-data [2]", "per-kernel spans of prefill.json / decode.json (e.g. decode "
     "dispatch ~0.17 ms per layer, SGLang's reading)", "per kernel",
     "the trace files are not in the stored snapshot; a communication kernel's span includes "
     "its in-kernel waiting, moesim times the transfer"),
]


# ---------------------------------------------------------------------------------------------
# Rendering


def fitted_table(ms, fast):
    with open(PROFILE, "rb") as f:
        measurements = tomllib.load(f)["measurements"]
    lines = ["| source | setting | published | moesim | error | moesim is |",
             "| --- | --- | --- | --- | --- | --- |"]
    errors = {}
    unknown = []
    for m in measurements:
        if m not in FITTED:
            unknown.append(m)
            continue
        for source, setting, pub, got, unit, higher_is_faster in FITTED[m](ms, fast):
            err = got / pub - 1
            errors.setdefault(source, []).append(err)
            lines.append(f"| {source} | {setting} | {num(pub)} {unit} | {num(got)} {unit} | "
                         f"{pct(err)} | {direction(err, higher_is_faster)} |")
    summary = []
    for source, errs in errors.items():
        worst = max(errs, key=abs)
        summary.append(f"- {source}: {len(errs)} rows, worst {pct(worst)}, mean |error| "
                       f"{100 * sum(abs(e) for e in errs) / len(errs):.1f}%.")
    for m in unknown:
        summary.append(f"- `{m}`: fitted, but this script has no rows for it yet.")
    return lines, summary


def direction(err, higher_is_faster):
    if abs(err) < 0.0005:
        return "exact"
    return "optimistic" if (err > 0) == higher_is_faster else "pessimistic"


def held_out_table(ms, fast):
    lines = ["| source | setting | published | moesim | error | moesim is | moesim's setting "
             "| like for like | profile |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    errors = []
    for h in HELD_OUT:
        if fast and not h["fast"]:
            continue
        got = h["price"](ms)
        err = got / h["published"] - 1
        errors.append((h, err))
        lines.append(f"| {h['source']} | {h['setting']} | {num(h['published'])} {h['unit']} | "
                     f"{num(got)} {h['unit']} | {pct(err)} | {direction(err, True)} | "
                     f"{h['moesim']} | {h['likeness']} | {h['profile']} |")
    return lines, errors


def not_expressible_table():
    lines = ["| source | setting | published | why moesim cannot express it |",
             "| --- | --- | --- | --- |"]
    for source, setting, published, why in NOT_EXPRESSIBLE:
        lines.append(f"| {source} | {setting} | {published} | {why} |")
    return lines


def held_out_summary(errors):
    errs = [e for _, e in errors]
    close = [e for h, e in errors if h["likeness"].startswith("close")]
    lo, hi = min(errs), max(errs)
    lines = [f"- {len(errs)} expressible rows: signed errors from {pct(lo)} to {pct(hi)} "
             f"(mean {pct(sum(errs) / len(errs))});",
             f"  {sum(1 for e in errs if e > 0)} optimistic, {sum(1 for e in errs if e < 0)} "
             f"pessimistic; {sum(1 for e in errs if abs(e) <= 0.10)} within 10%."]
    if close:
        lines.append(f"- Close rows (a profile's own setting): {', '.join(pct(e) for e in close)}.")
    lines.append(f"- {len(NOT_EXPRESSIBLE)} figures not expressible (listed below).")
    readme = (f"Fidelity: against {len(errs)} held-out public system figures (DeepSeek's fleet "
              "and profile, SGLang's H100 deployment; never used for fitting), moesim's per-node "
              f"throughput errs by {pct(lo)} to {pct(hi)} (positive: optimistic): "
              "[docs/fidelity.md](docs/fidelity.md).")
    return lines, readme


def generate(ms, fast):
    fitted, fitted_summary = fitted_table(ms, fast)
    held, errors = held_out_table(ms, fast)
    blocks = {"fitted": fitted + [""] + fitted_summary, "held-out": held}
    readme = None
    if not fast:
        summary, readme = held_out_summary(errors)
        blocks["held-out-summary"] = summary
        blocks["not-expressible"] = not_expressible_table()
    return blocks, readme


# ---------------------------------------------------------------------------------------------
# The document

BLOCK = re.compile(r"(<!-- BEGIN fidelity_report.py: ([a-z-]+) -->\n)(.*?)(<!-- END "
                   r"fidelity_report.py: \2 -->)", re.S)
README_LINE = re.compile(r"^Fidelity: against \d+ held-out public system figures.*$", re.M)


def doc_blocks(text):
    return {m.group(2): m.group(3).rstrip("\n").split("\n") for m in BLOCK.finditer(text)}


def replace_blocks(text, blocks):
    def sub(m):
        name = m.group(2)
        if name not in blocks:
            return m.group(0)
        return m.group(1) + "\n".join(blocks[name]) + "\n" + m.group(4)
    return BLOCK.sub(sub, text)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--moesim", default=os.path.join(ROOT, "build", "apps", "moesim"))
    p.add_argument("--doc", default=os.path.join(ROOT, "docs", "fidelity.md"))
    p.add_argument("--readme", default=os.path.join(ROOT, "README.md"))
    p.add_argument("--check", action="store_true",
                   help="compare with the document; exit 1 when it differs")
    p.add_argument("--fast", action="store_true", help="a few rows only")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="fidelity_report.") as tmp:
        blocks, readme = generate(Moesim(args.moesim, tmp), args.fast)
    with open(args.doc) as f:
        text = f.read()
    with open(args.readme) as f:
        readme_text = f.read()
    have = doc_blocks(text)
    missing = [name for name in blocks if name not in have]
    if missing:
        print(f"{args.doc}: no generated block {', '.join(missing)}", file=sys.stderr)
        return 2
    if args.fast:
        rows = [line for name in blocks for line in blocks[name] if line.startswith("| ")
                and not line.startswith("| source") and not line.startswith("| ---")]
        if not args.check:
            print("\n".join(rows))
            return 0
        doc_rows = {line for lines in have.values() for line in lines}
        stale = [r for r in rows if r not in doc_rows]
        for r in stale:
            key = "| ".join(r.split("| ")[:3])
            print(f"{args.doc}: this build gives\n  {r}", file=sys.stderr)
            for line in doc_rows:
                if line.startswith(key):
                    print(f"the document has\n  {line}", file=sys.stderr)
        if stale:
            print("regenerate it: scripts/fidelity_report.py", file=sys.stderr)
        return 1 if stale else 0
    new_text = replace_blocks(text, blocks)
    if not README_LINE.search(readme_text):
        print(f"{args.readme}: no line starting 'Fidelity: against N held-out public system "
              "figures'", file=sys.stderr)
        return 2
    new_readme = README_LINE.sub(lambda _: readme, readme_text)
    if args.check:
        stale = False
        for path, old, new in ((args.doc, text, new_text), (args.readme, readme_text, new_readme)):
            if old != new:
                stale = True
                sys.stderr.writelines(difflib.unified_diff(
                    old.splitlines(True), new.splitlines(True), path, "this build"))
        if stale:
            print("regenerate them: scripts/fidelity_report.py", file=sys.stderr)
        return 1 if stale else 0
    with open(args.doc, "w") as f:
        f.write(new_text)
    with open(args.readme, "w") as f:
        f.write(new_readme)
    return 0


if __name__ == "__main__":
    sys.exit(main())
