"""The page of one run directory: summary, latency CDFs, throughput and KV memory over time,
per-GPU step timeline with barrier waits, expert load heat maps, policy actions (docs/report.md).
Each figure comes from the files the run wrote; one whose data is missing says what it needs."""

import collections
import os
import tomllib

import matplotlib.pyplot as plt
import numpy as np

from .json_checks import Checker
from .markup import fmt, fmt_bytes

COMPUTE_SPANS = ("attention", "dense_ffn", "router", "experts", "lm_head")
COMM_SPANS = ("dispatch", "combine", "dispatch+combine (overlapped)")
SPAN_COLORS = {"attention": "#4c72b0", "dense_ffn": "#64b5cd", "router": "#8172b2",
               "experts": "#55a868", "lm_head": "#937860", "dispatch": "#dd8452",
               "combine": "#ccb974", "dispatch+combine (overlapped)": "#e7a35c",
               "wait": "#c44e52"}
TIMELINE_STEPS = 1  # steps of the first replica drawn in the timeline


def _pct(d, k):
    v = d.get(k) if isinstance(d, dict) else None
    return "n/a" if v is None else f"{100 * v:.1f}%"


def _summary(page, run):
    s = run.summary
    page.section("summary", "Summary")
    req = s.get("requests", {})
    rows = [
        ("scenario", s.get("scenario")), ("model", s.get("model")),
        ("topology", s.get("topology")), ("seed", s.get("seed")), ("fidelity", s.get("fidelity", "exact")),
        ("simulated", f"{fmt(s.get('simulated_s'))} s"), ("events", fmt(s.get("num_events"))),
        ("event digest", s.get("event_digest")),
        ("requests", f"arrived {fmt(req.get('arrived'))}, completed {fmt(req.get('completed'))}, "
                     f"rejected {fmt(req.get('rejected'))}, in flight {fmt(req.get('in_flight'))}"),
        ("conservation", "ok" if s.get("conservation_ok") else "BROKEN"),
    ]
    t = s.get("throughput", {})
    rows.append(("throughput", f"{fmt(t.get('input_tokens_per_s'))} input tok/s, "
                               f"{fmt(t.get('output_tokens_per_s'))} output tok/s, "
                               f"{fmt(t.get('completed_requests_per_s'))} completed req/s"))
    slo = s.get("slo", {})
    att = slo.get("attainment")
    rows.append(("SLO", f"TTFT <= {fmt(slo.get('ttft_ms'))} ms, TPOT <= {fmt(slo.get('tpot_ms'))} "
                        f"ms: {fmt(slo.get('num_met'))} met of {fmt(slo.get('num_decided'))} "
                        f"decided, attainment {'n/a' if att is None else f'{100 * att:.1f}%'}, "
                        f"goodput {fmt(slo.get('goodput_requests_per_s'))} req/s"))
    g = s.get("gpu_time_fraction", {})
    rows.append(("GPU time", f"compute {_pct(g, 'compute')}, communication "
                             f"{_pct(g, 'communication')}, barrier wait {_pct(g, 'barrier_wait')}"))
    rows.append(("memory", f"KV high-water {_pct(s, 'kv_high_water_fraction')} of pool, "
                           f"prefix-cache hit rate {_pct(s, 'prefix_cache_hit_rate')}"))
    rows.append(("experts", f"GPU imbalance (mean per layer and step) "
                            f"{fmt(s.get('expert_gpu_imbalance_mean'))}, balancedness "
                            f"{fmt(s.get('expert_gpu_balancedness'))}"))
    m = s.get("memory_per_gpu", {})
    rows.append(("per GPU (first)", f"HBM {fmt_bytes(m.get('hbm_bytes'))}: weights "
                                    f"{fmt_bytes(m.get('weight_bytes'))}, KV pool "
                                    f"{fmt_bytes(m.get('kv_pool_bytes'))} "
                                    f"({fmt(m.get('num_kv_blocks'))} blocks)"))
    c = s.get("counters", {})

    def counter(k, v):
        if isinstance(v, dict):  # per op kind: "kind n, ..." or "none"
            return ", ".join(f"{kind} {fmt(n)}" for kind, n in sorted(v.items())) or "none"
        return fmt_bytes(v) if k.endswith('_bytes') else fmt(v)
    rows.append(("counters", ", ".join(f"{k} {counter(k, v)}" for k, v in sorted(c.items()))))
    page.table(["figure", "value"], rows, tid="summary-table", left_cols=2)
    lat = []
    for key, name in (("queueing_ms", "queueing"), ("ttft_ms", "TTFT"), ("tpot_ms", "TPOT"),
                      ("e2e_ms", "end-to-end")):
        p = s.get(key) or {}
        lat.append([name] + [fmt(p.get(k)) for k in ("p50", "p90", "p99", "mean", "max")]
                   + [fmt(p.get("count", 0))])
    page.table(["latency (ms)", "p50", "p90", "p99", "mean", "max", "samples"], lat,
               tid="latency-table")


def _slo_limits(run):
    slo = run.summary.get("slo", {})
    return {"ttft_ms": slo.get("ttft_ms"), "tpot_ms": slo.get("tpot_ms")}


def _cdfs(page, run):
    page.section("latency", "Latency CDFs")
    req = run.requests
    limits = _slo_limits(run)
    for col, name, why in (("ttft_ms", "time to first token", "no request got a first token"),
                           ("tpot_ms", "time per output token",
                            "no request completed with two or more output tokens"),
                           ("e2e_ms", "end-to-end latency", "no requests completed")):
        fid = f"fig-cdf-{col.split('_')[0]}"
        if req is None:
            page.missing(fid, "requests.csv is missing ([outputs] requests_csv = true)")
            continue
        v = req[col].dropna().to_numpy(dtype=float) if col in req else np.array([])
        if v.size == 0:
            page.missing(fid, why)
            continue
        v = np.sort(v)
        fig, ax = plt.subplots(figsize=(6.5, 3))
        ax.step(v, np.arange(1, v.size + 1) / v.size, where="post", color="#4c72b0")
        lim = limits.get(col)
        if lim is not None:
            ax.axvline(lim, color="#c44e52", ls="--", lw=1, label=f"SLO {lim:g} ms")
            ax.legend(loc="lower right")
        for q in (0.5, 0.99):
            ax.axhline(q, color="#999", lw=0.5)
        ax.set_xlabel(f"{name} (ms)")
        ax.set_ylabel("fraction of requests")
        ax.set_ylim(0, 1.02)
        if v[-1] > 0 and v[0] > 0 and v[-1] / v[0] > 100:
            ax.set_xscale("log")
        ax.grid(alpha=0.3)
        page.figure(fid, fig, f"CDF of {name} over {v.size} requests (requests.csv, column "
                              f"{col}); p50 {np.percentile(v, 50):.4g} ms, p99 "
                              f"{np.percentile(v, 99):.4g} ms.")


def _time_bins(t0_s, t1_s, n=60):
    if t1_s <= t0_s:
        t1_s = t0_s + 1e-3
    return np.linspace(t0_s, t1_s, n + 1)


def _spread(t0, t1, amount, edges):
    """Per bin of `edges`, the part of each amount that falls in it when spread evenly over
    [t0, t1] (a zero-length interval puts it at t0)."""
    dur = t1 - t0
    inst = dur <= 0
    out = np.histogram(t0[inst], edges, weights=amount[inst])[0].astype(float)
    t0, t1, amount = t0[~inst], t1[~inst], amount[~inst]
    if t0.size:
        rate = amount / (t1 - t0)
        times = np.concatenate([t0, t1])
        d = np.concatenate([rate, -rate])
        order = np.argsort(times, kind="stable")
        times, d = times[order], d[order]
        level = np.cumsum(d)  # the rate after each breakpoint
        cum = np.concatenate([[0.0], np.cumsum(level[:-1] * np.diff(times))])
        f = np.interp(edges, times, cum, left=0.0, right=cum[-1])
        out += np.diff(f)
    # The running sum leaves rounding residue (~1e-8 of the amounts) in bins without a step.
    tol = 1e-9 * float(np.abs(amount).sum()) if amount.size else 0.0
    out[np.abs(out) <= tol] = 0.0
    return out


def _step_bins(steps, end_s):
    """Time bins of the step series: 10 to 100 bins of at least 5 median steps, over the run."""
    t0 = steps["start_ns"].to_numpy(dtype=float) / 1e9
    t1 = t0 + steps["duration_ns"].to_numpy(dtype=float) / 1e9
    span = max(end_s, float(t1.max()))
    nbins = int(max(10, min(100, span / max(5 * float(np.median(t1 - t0)), 1e-9))))
    return t0, t1, _time_bins(0.0, span, nbins)


def _bin_max(t, v, edges):
    """Per bin, the largest v of the samples at times t in it (NaN for an empty bin)."""
    idx = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, len(edges) - 2)
    out = np.full(len(edges) - 1, np.nan)
    np.fmax.at(out, idx, v)
    return out


def _throughput(page, run):
    page.section("throughput", "Throughput over time")
    steps, req = run.steps, run.requests
    end_s = run.summary.get("simulated_s") or 0
    if steps is not None and len(steps) > 0:
        # Bins of at least 5 median steps, so that a bin holds several steps of each replica.
        t0, t1, edges = _step_bins(steps, end_s)
        nbins = len(edges) - 1
        w = edges[1] - edges[0]
        pre = _spread(t0, t1, steps["prefill_tokens"].to_numpy(dtype=float), edges) / w
        dec = _spread(t0, t1, steps["decode_tokens"].to_numpy(dtype=float), edges) / w
        mid = (edges[:-1] + edges[1:]) / 2
        fig, (ax, bx) = plt.subplots(2, 1, figsize=(8, 4.6), sharex=True)
        ax.plot(mid, pre, color="#4c72b0", label="prefill tokens/s")
        ax.set_ylabel("prefill tokens/s")
        ax.grid(alpha=0.3)
        bx.plot(mid, dec, color="#55a868", label="decode (output) tokens/s")
        bx.set_ylabel("decode tokens/s")
        bx.grid(alpha=0.3)
        if req is not None and len(req) > 0:
            b2 = bx.twinx()
            arr = req["arrival_ns"].to_numpy() / 1e9
            done = req["done_ns"].to_numpy() / 1e9
            done = np.where(done < 0, np.inf, done)
            inflight = [(np.sum((arr <= x) & (done > x))) for x in mid]
            b2.plot(mid, inflight, color="#999", ls=":", label="requests in flight")
            b2.set_ylabel("requests in flight")
            b2.legend(loc="upper right", fontsize=7)
        bx.legend(loc="upper left", fontsize=7)
        bx.set_xlabel("simulated time (s)")
        page.figure("fig-throughput", fig,
                    f"Tokens computed per second (all replicas) in {nbins} bins of {w:.3g} s, each "
                    "step's tokens spread over its duration (steps.csv: prefill_tokens, "
                    "decode_tokens, start_ns, duration_ns), and requests in flight (requests.csv: "
                    "arrived, not done).")
    elif req is not None and (req["done_ns"] >= 0).any():
        done = req.loc[req["done_ns"] >= 0]
        edges = _time_bins(0.0, max(end_s, float(done["done_ns"].max()) / 1e9))
        w = edges[1] - edges[0]
        toks, _ = np.histogram(done["done_ns"] / 1e9, edges, weights=done["generated_tokens"])
        fig, ax = plt.subplots(figsize=(8, 3))
        ax.plot((edges[:-1] + edges[1:]) / 2, toks / w, color="#55a868")
        ax.set_xlabel("simulated time (s)")
        ax.set_ylabel("output tokens/s of completed requests")
        ax.grid(alpha=0.3)
        page.figure("fig-throughput", fig, "Output tokens of requests completed per second, "
                    "by completion time (requests.csv; this run has no steps.csv).")
    else:
        page.missing("fig-throughput", "no step ran and no request completed" if steps is not None
                     else "no steps.csv and no completed request in requests.csv")


def _memory(page, run):
    page.section("memory", "KV memory over time")
    steps = run.steps
    if steps is None:
        page.missing("fig-memory", "needs steps.csv, written by `moesim run --out DIR` "
                     "([outputs] steps_csv = true)")
        return
    if len(steps) == 0 or (steps["kv_blocks"] <= 0).all():
        page.missing("fig-memory", "no step ran" if len(steps) == 0 else "no KV pool")
        return
    fig, ax = plt.subplots(figsize=(8, 3))
    for i, (rep, d) in enumerate(steps.groupby("replica")):
        if i >= 8:
            break
        t = d["start_ns"].to_numpy() / 1e9
        ax.plot(t, (d["kv_owned_blocks"] / d["kv_blocks"]).to_numpy() * 100,
                label=f"replica {rep}: owned by sequences", lw=1)
        if (d["kv_cached_blocks"] > 0).any():
            ax.plot(t, ((d["kv_owned_blocks"] + d["kv_cached_blocks"]) / d["kv_blocks"])
                    .to_numpy() * 100, ls="--", lw=1, label=f"replica {rep}: + prefix cache")
    t0, _, edges = _step_bins(steps, run.summary.get("simulated_s") or 0)
    ax.step(edges[:-1], _bin_max(t0, steps["kv_used_fraction_max"].to_numpy(float) * 100, edges),
            where="post", color="#c44e52", lw=0.8, alpha=0.8,
            label="fullest rank, max per bin (any replica)")
    hw = run.summary.get("kv_high_water_fraction")
    if hw is not None:
        ax.axhline(hw * 100, color="#333", ls=":", lw=1, label=f"high-water {100 * hw:.3g}%")
    ax.set_xlabel("simulated time (s)")
    ax.set_ylabel("% of KV blocks")
    ax.legend(fontsize=7, loc="upper left")
    ax.grid(alpha=0.3)
    m = run.summary.get("memory_per_gpu", {})
    page.figure("fig-memory", fig,
                "KV blocks in use when each step starts, as a share of the replica's pools "
                "(steps.csv: kv_owned_blocks, kv_cached_blocks, kv_blocks; summed over attention "
                f"ranks; at most the first 8 replicas drawn). Per GPU: KV pool {fmt_bytes(m.get('kv_pool_bytes'))}"
                f", weights {fmt_bytes(m.get('weight_bytes'))} (summary.json).")


def _spans(run):
    """The trace's complete spans ('X') and instants, as lists of dicts."""
    xs = [e for e in run.trace if e.get("ph") == "X"]
    inst = [e for e in run.trace if e.get("ph") in ("i", "I")]
    names = {}
    for e in run.trace:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            names[(e.get("pid"), e.get("tid"))] = e.get("args", {}).get("name")
    return xs, inst, names


def _timeline(page, run):
    page.section("timeline", "Per-GPU step timeline and barrier waits")
    if run.trace is None:
        page.missing("fig-timeline", "needs trace.json: `moesim run --out DIR` with [outputs] "
                     "chrome_trace = true, steps inside --trace-window")
        page.missing("fig-timeline-zoom", "needs trace.json (see above)")
        page.missing("fig-gpu-time", "needs trace.json (see above)")
    else:
        xs, _, names = _spans(run)
        if not xs:
            page.missing("fig-timeline", "no step started inside the trace window "
                         "(--trace-window START_S:END_S)")
            page.missing("fig-timeline-zoom", "no step started inside the trace window")
            page.missing("fig-gpu-time", "no step started inside the trace window")
        else:
            _draw_timeline(page, xs, names)
    steps = run.steps
    if steps is None:
        page.missing("fig-wait-series", "needs steps.csv ([outputs] steps_csv = true)")
    elif len(steps) == 0:
        page.missing("fig-wait-series", "no step ran")
    else:
        fig, ax = plt.subplots(figsize=(8, 2.8))
        t0, t1, edges = _step_bins(steps, run.summary.get("simulated_s") or 0)
        dur = _spread(t0, t1, steps["duration_ns"].to_numpy(float), edges)
        wait = _spread(t0, t1, steps["wait_ns_mean"].to_numpy(float), edges)
        share = np.divide(wait, dur, out=np.full_like(dur, np.nan), where=dur > 0) * 100
        d = steps["duration_ns"].to_numpy(float)
        worst = np.divide(steps["wait_ns_max"].to_numpy(float), d, out=np.zeros_like(d),
                          where=d > 0) * 100
        ax.step(edges[:-1], share, where="post", lw=1,
                label="mean over the GPUs (time-weighted per bin)")
        ax.step(edges[:-1], _bin_max(t0, worst, edges), where="post", lw=1, color="#c44e52",
                label="most waiting GPU, worst step of the bin")
        ax.set_ylabel("barrier wait, % of step")
        ax.set_xlabel("simulated time (s)")
        ax.legend(loc="upper right", fontsize=7)
        ax.grid(alpha=0.3)
        page.figure("fig-wait-series", fig, "Barrier wait as a share of step time over the run, "
                    f"every replica's steps in {len(edges) - 1} bins (steps.csv: wait_ns_mean and "
                    "wait_ns_max over duration_ns).")


def _gantt(spans, tids, names, pid0, t0, title):
    fig, ax = plt.subplots(figsize=(10, 0.3 * len(tids) + 1.6))
    by = collections.defaultdict(list)
    for e in spans:
        by[(e["tid"], e["name"])].append(((e["ts"] - t0) / 1e3, max(e["dur"], 1e-3) / 1e3))
    row = {tid: i for i, tid in enumerate(tids)}
    for (tid, name), bars in sorted(by.items()):
        ax.broken_barh(bars, (row[tid] - 0.4, 0.8), facecolors=SPAN_COLORS.get(name, "#777"),
                       label=name)
    h, lab = ax.get_legend_handles_labels()
    uniq = dict(zip(lab, h))
    ax.legend(uniq.values(), uniq.keys(), ncol=min(len(uniq), 8), fontsize=7,
              loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    ax.set_yticks(range(len(tids)))
    ax.set_yticklabels([names.get((pid0, t), f"gpu {t}") for t in tids])
    ax.invert_yaxis()
    ax.set_xlabel(title)
    return fig


def _draw_timeline(page, xs, names):
    pid0 = min(e["pid"] for e in xs)
    mine = [e for e in xs if e["pid"] == pid0]
    tids = sorted({e["tid"] for e in mine})
    t0 = min(e["ts"] for e in mine)
    # Step ends: the lm_head spans of the first GPU (one per step).
    ends = sorted(e["ts"] + e["dur"] for e in mine if e["name"] == "lm_head" and e["tid"] == tids[0])
    t1 = ends[TIMELINE_STEPS - 1] if len(ends) >= TIMELINE_STEPS else max(
        e["ts"] + e["dur"] for e in mine)
    shown = [e for e in mine if e["ts"] < t1]
    fig = _gantt(shown, tids, names, pid0, t0, "ms from the start of the first traced step")
    page.figure("fig-timeline", fig,
                f"The first traced step of replica {pid0} (trace.json): one row per GPU, one bar "
                "per span, layer after layer; red bars are barrier waits, the time a GPU waits "
                "for the slowest GPU of the collective.", fmt_="png")
    # Zoom: the first two MoE layers of that step (the layers with expert spans).
    moe = sorted({e.get("args", {}).get("layer") for e in shown if e["name"] == "experts"})
    if moe:
        keep = set(moe[:2])
        z = [e for e in shown if e.get("args", {}).get("layer") in keep]
        zt0 = min(e["ts"] for e in z)
        fig = _gantt(z, tids, names, pid0, zt0, "ms from the start of the zoomed layers")
        page.figure("fig-timeline-zoom", fig,
                    f"Zoom on MoE layers {', '.join(str(l) for l in sorted(keep))} of the same "
                    "step: dispatch, expert compute and combine per GPU; the wait (red) before "
                    "each collective is the straggler barrier.", fmt_="svg")
    else:
        page.missing("fig-timeline-zoom", "the traced step has no MoE layer (dense model)")
    # Time by kind per GPU over the whole window (every replica).
    tot = collections.defaultdict(lambda: collections.defaultdict(float))
    for e in xs:
        tot[(e["pid"], e["tid"])][e["name"]] += e["dur"] / 1e3
    keys = sorted(tot)[:64]
    fig, ax = plt.subplots(figsize=(10, 3))
    bottom = np.zeros(len(keys))
    kinds = [k for k in list(COMPUTE_SPANS) + list(COMM_SPANS) + ["wait"]
             if any(tot[g].get(k) for g in keys)]
    for k in kinds:
        vals = np.array([tot[g].get(k, 0.0) for g in keys])
        ax.bar(range(len(keys)), vals, bottom=bottom, color=SPAN_COLORS.get(k, "#777"), label=k)
        bottom += vals
    ax.set_xticks(range(len(keys)))
    ax.set_xticklabels([f"r{p} {names.get((p, t), f'gpu {t}')}" for p, t in keys], rotation=90,
                       fontsize=6)
    ax.set_ylabel("ms in the trace window")
    ax.legend(fontsize=7, ncol=4)
    page.figure("fig-gpu-time", fig, "Time per GPU by span kind over the trace window "
                "(trace.json; at most 64 GPUs): a GPU with little wait is the straggler the others "
                "wait for.")


def _heatmaps(page, run):
    page.section("experts", "Expert load")
    st = run.step_trace()
    if st is not None and st[1]:
        header, steps = st
        ne = 0
        layers = []
        for l in header.get("model", {}).get("layers", []):
            if l.get("ffn", {}).get("kind") == "moe":
                layers.append(l["layer"])
                ne = l["ffn"]["num_routed_experts"]
        gpus = max((g for r in header.get("replicas", []) for g in r.get("gpus", [])),
                   default=-1) + 1
        li = {l: i for i, l in enumerate(layers)}
        by_exp = np.zeros((len(layers), ne))
        by_gpu = np.zeros((len(layers), max(gpus, 1)))
        for s in steps:
            for lay in s.get("layers", []):
                i = li.get(lay["layer"])
                if i is None:
                    continue
                for src, e, dst, n in lay.get("routing", []):
                    by_exp[i, e] += n
                    if dst < by_gpu.shape[1]:
                        by_gpu[i, dst] += n
        if by_exp.sum() > 0:
            _heat(page, "fig-expert-heatmap", by_exp, "routed expert", layers,
                  f"Selections per routed expert and MoE layer over the {len(steps)} recorded "
                  "steps (step trace, routing counts), divided by the layer's mean per expert: "
                  "1 is an even share, hot experts are bright.")
            _heat(page, "fig-expert-gpu", by_gpu, "GPU", layers,
                  "Selections received per GPU and MoE layer (step trace, routing destination), "
                  "over the layer's mean per GPU: the straggler of each layer's all-to-all.")
            return
    if st is not None and st[0] is not None and not any(
            l.get("ffn", {}).get("kind") == "moe"
            for l in st[0].get("model", {}).get("layers", [])):
        page.missing("fig-expert-heatmap", "the model has no MoE layer (a dense model)")
        page.missing("fig-expert-gpu", "the model has no MoE layer (a dense model)")
        return
    why = ("the step trace has no routed selections (no recorded step had tokens)"
           if st is not None else "needs a step trace: `moesim run SCENARIO --out DIR --record DIR/steps.jsonl` "
                "(exact fidelity; at most [outputs] record_max_steps steps)")
    page.missing("fig-expert-heatmap", why)
    # Without routing counts: expert compute time per layer and GPU from the Chrome trace.
    if run.trace is not None:
        xs = [e for e in run.trace if e.get("ph") == "X" and e.get("name") == "experts"]
        if xs:
            layers = sorted({e.get("args", {}).get("layer", -1) for e in xs})
            gp = sorted({(e["pid"], e["tid"]) for e in xs})
            li = {l: i for i, l in enumerate(layers)}
            gi = {g: i for i, g in enumerate(gp)}
            m = np.zeros((len(layers), len(gp)))
            for e in xs:
                m[li[e.get("args", {}).get("layer", -1)], gi[(e["pid"], e["tid"])]] += e["dur"]
            _heat(page, "fig-expert-gpu", m, "GPU (replica order)", layers,
                  "Expert compute time per GPU and model layer in the trace window (trace.json, "
                  "`experts` spans), over the layer's mean per GPU. A proxy for expert load: "
                  "selections per expert need a step trace (--record).")
            return
    page.missing("fig-expert-gpu", "needs a step trace (--record) or expert spans in trace.json")


def _heat(page, fid, m, xlabel, layers, caption):
    mean = m.mean(axis=1, keepdims=True)
    rel = np.divide(m, mean, out=np.full_like(m, np.nan), where=mean > 0)
    fig, ax = plt.subplots(figsize=(10, min(0.09 * len(layers) + 1.5, 7)))
    im = ax.imshow(rel, aspect="auto", interpolation="nearest", cmap="magma")
    fig.colorbar(im, ax=ax, label="load / layer mean")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("MoE layer")
    step = max(1, len(layers) // 12)
    ax.set_yticks(range(0, len(layers), step))
    ax.set_yticklabels([str(layers[i]) for i in range(0, len(layers), step)])
    page.figure(fid, fig, caption + f" Max {np.nanmax(rel):.3g}x the mean.", fmt_="png")


def _actions(page, run):
    page.section("actions", "Policy actions")
    s = run.summary
    acts = s.get("actions") or {}
    pm = s.get("policy_metrics") or {}
    if acts:
        names = sorted(acts)
        fig, ax = plt.subplots(figsize=(7, 0.35 * len(names) + 1))
        ax.barh(range(len(names)), [acts[n] for n in names], color="#8172b2")
        ax.set_yticks(range(len(names)))
        ax.set_yticklabels(names)
        ax.set_xlabel("count over the run")
        if max(acts.values()) / max(min(acts.values()), 1) > 100:
            ax.set_xscale("log")
        page.figure("fig-actions", fig, "Policy and workload actions by name (summary.json: "
                    "actions).")
        inst = [e for e in (run.trace or []) if e.get("ph") in ("i", "I")]
        if inst:
            by = collections.defaultdict(list)
            for e in inst:
                by[e["name"]].append(e["ts"] / 1e6)
            fig, ax = plt.subplots(figsize=(8, 0.35 * len(by) + 1))
            for i, (n, ts) in enumerate(sorted(by.items())):
                ax.plot(ts, [i] * len(ts), "|", ms=10)
            ax.set_yticks(range(len(by)))
            ax.set_yticklabels(sorted(by))
            ax.set_xlabel("simulated time (s)")
            page.figure("fig-action-times", fig, "When the actions happened (trace.json "
                        "instants; the trace keeps at most 100,000).")
        else:
            page.note("No action instants in trace.json: their times are not shown.")
        page.table(["action", "count"], [(n, fmt(acts[n])) for n in names], tid="actions-table")
    else:
        page.missing("fig-actions", "no policy or workload action in this run (summary.json: "
                     "actions is empty)")
    if pm:
        page.table(["policy metric", "value"], [(k, fmt(v)) for k, v in sorted(pm.items())],
                   tid="policy-metrics-table")


MIN_ATTAINMENT = 0.99  # a run meets its [slo] at this attainment (the sweep's default)


def _resolved_toml(run, name, tables=(), numbers=(), texts=()):
    """A file of resolved/ as a dict, or None when it is absent or not TOML (the page then
    describes less). Its `tables` must be tables, `numbers` (dotted) finite numbers > 0 and
    `texts` strings where present: BadInput otherwise."""
    path = os.path.join(run.dir, "resolved", os.path.basename(name))
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError, RecursionError):
        return None
    c = Checker(path)
    for key in tables:
        c.get(doc, key, "", "dict")
    for key in numbers + texts:
        table, _, leaf = key.rpartition(".")
        parent = doc.get(table, {}) if table else doc
        if leaf in parent:
            c.value(parent[leaf], key, "num" if key in numbers else "str", above=0
                    if key in numbers else None)
    return doc


def _price_text(gpu):
    if gpu and gpu.get("price_usd_per_hour") is not None:
        return (f"${gpu['price_usd_per_hour']:g} per GPU-hour (topology; "
                f"{gpu.get('price_source', 'no source')})")
    return "no GPU price (costs in GPU-hours)"


def _measured_window_lines(summary):
    """Banner lines on the measured window (summary.json "measurement", docs/outputs.md "Steady
    state"): where it starts, whether it converged, and how many requests were censored."""
    m = summary.get("measurement")
    if not m:
        return []
    req = summary.get("requests", {})
    if m.get("terminating"):
        where = "every request (a finite workload)"
    else:
        where = (f"from {fmt(m.get('warmup_s'))} s ({m.get('warmup')}, "
                 f"{m.get('warmup_requests')} warm-up requests not measured)")
    verdict = "converged" if m.get("converged") else f"NOT CONVERGED: {m.get('reason')}"
    return [f"measured {where}; {verdict}",
            f"{req.get('in_flight', 0)} of {req.get('arrived', 0)} measured requests in flight at "
            f"the end (censored: counted in the percentiles and, once late, as misses)"]


def _verdict(run):
    """("meets" | "misses" | "unknown", text): attainment of the scenario's [slo] against
    MIN_ATTAINMENT, naming the limits the missing requests exceeded."""
    s = run.summary
    slo = s.get("slo", {})
    att = slo.get("attainment")
    limits = [f"{k.split('_')[0].upper()} <= {fmt(slo.get(k))} ms" for k in ("ttft_ms", "tpot_ms")
              if slo.get(k) is not None]
    if not limits:
        return "unknown", "SLO: none (the scenario has no [slo])"
    rule = f"{', '.join(limits)} for >= {100 * MIN_ATTAINMENT:g}% of decided requests"
    if att is None:
        return "unknown", f"SLO ({rule}): no request decided"
    if att >= MIN_ATTAINMENT:
        return "meets", f"MEETS the SLO ({rule}): attainment {100 * att:.1f}%"
    over = []
    rq = run.requests
    for k in ("ttft_ms", "tpot_ms"):
        if slo.get(k) is not None and rq is not None and k in rq:
            n = int((rq[k] > slo[k]).sum())
            if n:
                over.append(f"{n} requests over {k.split('_')[0].upper()} {fmt(slo[k])} ms")
    return "misses", (f"MISSES the SLO ({rule}): attainment {100 * att:.1f}%"
                      + (f"; {', '.join(over)}" if over else ""))


def describe(page, run):
    """The deployment at the top of the page and the SLO verdict banner."""
    s = run.summary
    rj = run.run_json or {}
    sc = _resolved_toml(run, "scenario.toml", tables=("deployment",), texts=("topology",)) or {}
    topo = sc.get("topology")
    topo_doc = (_resolved_toml(run, topo, tables=("gpu",), numbers=("gpu.price_usd_per_hour",),
                               texts=("gpu.price_source", "gpu.model", "gpu.name"))
                if topo else None)
    gpu = (topo_doc or {}).get("gpu", {})
    dep = sc.get("deployment", {})
    reps, per = rj.get("replicas"), rj.get("gpus_per_replica")
    gpus = reps * per if reps and per else None
    parallel = ", ".join(f"{k}={v}" for k, v in dep.items() if not isinstance(v, dict))
    lines = [f"model {s.get('model')} on {fmt(gpus)} GPUs ({gpu.get('model', gpu.get('name', '?'))})"
             f" of topology {s.get('topology')}: {fmt(reps)} replicas x {fmt(per)} GPUs",
             f"deployment: {parallel or 'defaults'}; max_seqs {fmt(rj.get('max_seqs'))}",
             f"price: {_price_text(gpu)}"]
    lines += _measured_window_lines(s)
    kind, text = _verdict(run)
    page.describe(lines, kind, text)


def build(page, run):
    describe(page, run)
    _summary(page, run)
    _cdfs(page, run)
    _throughput(page, run)
    _memory(page, run)
    _timeline(page, run)
    _heatmaps(page, run)
    _actions(page, run)
