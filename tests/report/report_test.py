#!/usr/bin/env python3
"""ctest report.generator: the report generator (python/moesim_report) on fresh moesim outputs.

Checks, without a browser: the step series a run writes (steps.csv) against the run's own
summary and requests; which input is which (run directory, sweep CSV, search JSON; anything else
is bad input); that every figure is drawn when its data exists and says "n/a" (drawing nothing)
when it does not; the cost table's arithmetic; and that the same input gives the same page.

usage: report_test.py --moesim BIN --work DIR"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "python"))

import pandas as pd  # noqa: E402

from moesim_report import BadInput, build_report, detect  # noqa: E402

FAILS = []


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL", what)


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit {r.returncode}\n{r.stderr[-2000:]}")
    return r


def drawn(page, fid):
    m = re.search(rf'<figure id="{fid}" data-kind="(svg|png)">(.*?)</figure>', page, re.S)
    return m is not None and (("<svg" in m.group(2) and "<path" in m.group(2))
                              or "data:image/png;base64," in m.group(2))


def na(page, fid):
    m = re.search(rf'<div id="{fid}" class="figure-na" data-na="yes"><p class="na">n/a: ([^<]+)',
                  page)
    return m.group(1) if m else None


def verdict(page):
    m = re.search(r'<p id="verdict" class="[a-z]+" data-verdict="([a-z]+)">', page)
    return m.group(1) if m else None


def test_steps_csv(rd):
    s = json.load(open(os.path.join(rd, "summary.json")))
    st = pd.read_csv(os.path.join(rd, "steps.csv"))
    rq = pd.read_csv(os.path.join(rd, "requests.csv"))
    check(len(st) == s["counters"]["steps"],
          f"steps.csv rows {len(st)} != counters.steps {s['counters']['steps']}")
    check((st["duration_ns"] > 0).all(), "steps.csv: a step without duration")
    check((st["kv_owned_blocks"] + st["kv_cached_blocks"] <= st["kv_blocks"]).all(),
          "steps.csv: more KV blocks used than the pool")
    check((st["wait_ns_max"] + 1 >= st["wait_ns_mean"]).all(), "steps.csv: max wait < mean")
    for rep, d in st.groupby("replica"):
        check(d["start_ns"].is_monotonic_increasing and d["step"].is_monotonic_increasing,
              f"steps.csv: replica {rep} out of order")
        # A replica runs one step at a time: each starts when (or after) the previous ends.
        check(((d["start_ns"].shift(-1) - (d["start_ns"] + d["duration_ns"])).dropna() >= 0).all(),
              f"steps.csv: replica {rep} steps overlap")
    # Every output token but a request's first comes from one decode slice; steps still running
    # at the end count tokens no request has yet.
    emitted = int((rq["generated_tokens"] - 1).clip(lower=0).sum())
    decode = int(st["decode_tokens"].sum())
    running = int(st.groupby("replica").tail(1)["decode_tokens"].sum())
    check(emitted <= decode <= emitted + running + int(s["counters"].get("preemptions", 0)) * 4096,
          f"steps.csv: decode tokens {decode} vs output tokens after the first {emitted}")
    # The binned wait share of the figure stays a share, also in bins without a step.
    from moesim_report.run_report import _spread, _step_bins
    t0, t1, edges = _step_bins(st, s["simulated_s"])
    dur = _spread(t0, t1, st["duration_ns"].to_numpy(float), edges)
    wait = _spread(t0, t1, st["wait_ns_mean"].to_numpy(float), edges)
    check((dur >= 0).all() and (wait >= 0).all(), "binned step time or wait below 0")
    share = wait[dur > 0] / dur[dur > 0]
    check(((share >= 0) & (share <= 1 + 1e-9)).all(), f"binned wait share outside [0, 1]: {share}")
    check(abs(dur.sum() - st["duration_ns"].sum()) <= 1e-6 * st["duration_ns"].sum(),
          "binning lost step time")
    hw = s["kv_high_water_fraction"]
    # steps.csv writes the fraction with 6 decimals ("%.6f"): up to 5e-7 above the exact value.
    check(st["kv_used_fraction_max"].max() <= hw + 5e-7 + 1e-9,
          f"steps.csv: KV use {st['kv_used_fraction_max'].max()} above the high-water {hw}")
    check(st["kv_used_fraction_max"].max() > 0, "steps.csv: KV never used")


def test_spread():
    import numpy as np
    from moesim_report.run_report import _spread
    e = np.array([0.0, 1.0, 2.0, 3.0])
    got = _spread(np.array([0.5, 1.0, 2.5]), np.array([1.5, 1.0, 2.5]), np.array([10.0, 3, 4]), e)
    check(list(got) == [5.0, 8.0, 4.0], f"_spread: {list(got)} != [5, 8, 4]")
    got = _spread(np.array([0.5, 0.5]), np.array([2.5, 1.5]), np.array([20.0, 10.0]), e)
    check(list(got) == [10.0, 15.0, 5.0], f"_spread overlapping: {list(got)}")


def main():
    test_spread()
    ap = argparse.ArgumentParser()
    ap.add_argument("--moesim", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    w = a.work
    shutil.rmtree(w, ignore_errors=True)
    os.makedirs(w)

    rd = os.path.join(w, "run")
    run([a.moesim, "run", "tests/report/report_run.toml", "--out", rd,
         "--record", os.path.join(rd, "steps.jsonl"), "--record-steps", "20"])
    test_steps_csv(rd)

    # Detection.
    check(detect(rd)[0] == "run", "run directory not detected")
    check(detect(os.path.join(rd, "summary.json"))[0] == "run", "summary.json not a run")
    for bad in (os.path.join(w, "nope"), os.path.join(rd, "requests.csv"),
                os.path.join(rd, "resolved"), os.path.join(rd, "steps.jsonl")):
        try:
            detect(bad)
            check(False, f"{bad}: detected as a moesim output")
        except BadInput as e:
            check("not a moesim output" in str(e) or "no such file" in str(e),
                  f"{bad}: message {e}")

    page, kind = build_report(rd)
    check(kind == "run", "kind")
    for fid in ("fig-cdf-ttft", "fig-cdf-tpot", "fig-cdf-e2e", "fig-throughput", "fig-memory",
                "fig-timeline", "fig-timeline-zoom", "fig-gpu-time", "fig-wait-series",
                "fig-expert-heatmap", "fig-expert-gpu", "fig-actions"):
        check(drawn(page, fid), f"run: {fid} not drawn ({na(page, fid)})")
    check(not re.search(r'(src|href)="(https?:)?//', page), "run: a network reference")
    check(build_report(rd)[0] == page, "run: the same input gave a different page")
    # The deployment on top and the verdict: the run's attainment against 99%.
    s = json.load(open(os.path.join(rd, "summary.json")))
    att = s["slo"]["attainment"]
    check(verdict(page) == ("meets" if att >= 0.99 else "misses"),
          f"run: verdict {verdict(page)} for attainment {att}")
    check('<div id="deployment"><p>model ' in page, "run: no deployment description")
    check("price: $6.305 per GPU-hour (topology; CoreWeave" in page,
          "run: the topology's price with its source")

    # Nothing completed and no first token: the latency figures say so and draw nothing.
    nd = os.path.join(w, "run_nothing")
    shutil.copytree(rd, nd, ignore=shutil.ignore_patterns("steps.jsonl", "trace.json",
                                                           "steps.csv"))
    rq = pd.read_csv(os.path.join(nd, "requests.csv"))
    for c in ("first_token_ns", "done_ns"):
        rq[c] = -1
    for c in ("ttft_ms", "tpot_ms", "e2e_ms"):
        rq[c] = float("nan")
    rq["outcome"] = "in_flight"
    rq.to_csv(os.path.join(nd, "requests.csv"), index=False)
    page, _ = build_report(nd)
    check(na(page, "fig-cdf-ttft") == "no request got a first token", "ttft n/a")
    check(na(page, "fig-cdf-e2e") == "no requests completed", "e2e n/a")
    check(na(page, "fig-cdf-tpot") is not None, "tpot n/a")
    check(na(page, "fig-throughput") is not None, "throughput n/a without steps.csv or completions")
    check("steps.csv" in (na(page, "fig-memory") or ""), "memory: says it needs steps.csv")
    check("--record" in (na(page, "fig-expert-heatmap") or ""), "heat map: says it needs --record")
    check("trace.json" in (na(page, "fig-timeline") or ""), "timeline: says it needs trace.json")

    # Sweep: detection, figures, the cost arithmetic, and an attainment-free sweep.
    sw = os.path.join(w, "sweep.csv")
    run([a.moesim, "sweep", "tests/report/tiny_sweep.toml", "--threads", "1", "--out", sw])
    check(detect(sw) == ("sweep", sw), "sweep CSV not detected")
    sd = os.path.join(w, "sweepdir")
    os.makedirs(sd)
    shutil.copy(sw, sd)
    check(detect(sd)[0] == "sweep", "directory holding a sweep CSV not detected")
    page, kind = build_report(sw, gpu_price_per_hour=2.0)
    check(kind == "sweep", "sweep kind")
    for fid in ("fig-slo-grid", "fig-pareto", "fig-pareto-tpot"):
        check(drawn(page, fid), f"sweep: {fid} not drawn ({na(page, fid)})")
    df = pd.read_csv(sw)
    r0 = df[df["config_idx"] == 0].iloc[0]
    gpuh = r0["num_gpus"] * 1e6 / (r0["output_tokens_per_s"] * 3600)
    row = re.search(r'<tr><td class="l">c0</td>(.*?)</tr>', page).group(1)
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", row)
    check(cells[-5] == f"{gpuh:.4g}", f"sweep: GPU-h per M output tokens {cells[-5]} != {gpuh:.4g}")
    check(cells[-3] == "2", f"sweep: the report's price {cells[-3]}")
    check(cells[-2] == f"{gpuh * 2:.4g}", f"sweep: $ per M output tokens {cells[-2]}")
    user = 1000 / df[df["config_idx"] == 0]["tpot_p50_ms"].mean()
    check(cells[5] == f"{user:.4g}", f"sweep: tok/s per user {cells[5]} != {user:.4g}")
    check(verdict(page) in ("meets", "misses"), "sweep: no verdict banner")
    check("price: $2 per GPU-hour (report --gpu-price-per-hour)" in page, "sweep: price line")
    # Without a report price each configuration keeps the sweep's own: its topology's.
    page_tp, _ = build_report(sw)
    check("$ / M output tok" in page_tp and "price: $6.305 per GPU-hour (topology)" in page_tp,
          "sweep: the topology's price not used without a report price")
    df2 = df.copy()
    df2["slo_attainment"] = float("nan")
    sw2 = os.path.join(w, "sweep_noslo.csv")
    df2.to_csv(sw2, index=False)
    page, _ = build_report(sw2)
    check(na(page, "fig-slo-grid") is not None, "sweep: attainment-free grid not n/a")
    check('<td class="">n/a</td>' in page, "sweep: attainment-free cost table rows not n/a")

    # Search.
    r = run([a.moesim, "search", "sweeps/scenarios/tiny_chat.toml", "--grid",
             "tests/report/tiny_sweep.toml", "--slo", "ttft_p99_ms=200,tpot_p99_ms=20",
             "--threads", "1", "--tolerance", "0.3", "--max-doublings", "3", "--json"])
    sj = os.path.join(w, "search.json")
    with open(sj, "w") as f:
        f.write(r.stdout)
    check(detect(sj) == ("search", sj), "search JSON not detected")
    page, kind = build_report(sj, gpu_price_per_hour=3.0)
    for fid in ("fig-slo-grid", "fig-search-probes", "fig-pareto"):
        check(drawn(page, fid), f"search: {fid} not drawn ({na(page, fid)})")
    doc = json.loads(r.stdout)
    # The cost in the one unit of sweep and search: per million tokens, not per 1k requests.
    check("per 1k" not in page and "$ / M output tok" in page, "search: cost not per M tokens")
    c0 = doc["configs"][0]
    if c0.get("gpu_hours_per_m_output_tokens") is not None:
        row = re.search(r'<tr><td class="l">c0</td>(.*?)</tr>', page).group(1)
        cells = re.findall(r"<td[^>]*>([^<]*)</td>", row)
        check(cells[-2] == f"{c0['gpu_hours_per_m_output_tokens'] * 3:.4g}",
              f"search: $ per M output tokens {cells[-2]}")
        check(cells[5] == f"{c0['output_tokens_per_s_per_user']:.4g}",
              f"search: tok/s per user {cells[5]}")
    check(verdict(page) == ("meets" if any(c["feasible"] for c in doc["configs"]) else "misses"),
          "search: verdict")
    for c in doc["configs"]:
        c["found"], c["max_rate_per_s"], c["max_multiplier"] = False, None, None
    sj2 = os.path.join(w, "search_none.json")
    with open(sj2, "w") as f:
        json.dump(doc, f)
    page, _ = build_report(sj2)
    check(na(page, "fig-slo-grid") == "no configuration met the SLOs at any probed rate",
          "search: nothing met, grid not n/a")
    check(na(page, "fig-pareto") is not None, "search: nothing met, pareto not n/a")

    print(f"report.generator: {len(FAILS)} failure(s)")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
