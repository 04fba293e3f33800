"""The pages of a sweep CSV and a search JSON: SLO attainment grid, Pareto frontier and cost
table (docs/report.md). Configurations are the sweep's config_idx (figures averaged over their
seeds, status ok only) or the search's configs."""

import math
import os

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from .markup import fmt

MIN_ATTAINMENT = 0.99  # a sweep configuration is SLO-feasible at this mean attainment or more


def _label(params, row):
    return ", ".join(f"{p}={row[p]}" for p in params) if params else "scenario"


def _grid(page, fid, table, params, value_col, title, caption, fmt_cell, cmap="RdYlGn",
          vmin=None, vmax=None, suffix_col=None):
    """A heat map of value_col over the parameter grid: rows = every parameter but the last,
    columns = the last (one row without parameters). NaN cells read n/a."""
    if params:
        col = params[-1]
        rows = params[:-1]
        cvals = list(dict.fromkeys(table[col].tolist()))
        if rows:
            rkeys = list(dict.fromkeys(tuple(r) for r in table[rows].itertuples(index=False)))
        else:
            rkeys = [()]
    else:
        col, rows, cvals, rkeys = None, [], ["(scenario)"], [()]
    m = np.full((len(rkeys), len(cvals)), np.nan)
    suffix = [[""] * len(cvals) for _ in rkeys] if suffix_col else None
    for _, r in table.iterrows():
        i = rkeys.index(tuple(r[p] for p in rows)) if rows else 0
        j = cvals.index(r[col]) if col else 0
        m[i, j] = r[value_col] if r[value_col] is not None else np.nan
        if suffix_col:
            suffix[i][j] = r[suffix_col]
    if np.all(np.isnan(m)):
        return False
    fig, ax = plt.subplots(figsize=(max(4, 1.1 * len(cvals) + 2), 0.5 * len(rkeys) + 1.6))
    im = ax.imshow(np.ma.masked_invalid(m), cmap=cmap, aspect="auto", vmin=vmin, vmax=vmax)
    for i in range(m.shape[0]):
        for j in range(m.shape[1]):
            if np.isnan(m[i, j]):
                ax.text(j, i, "n/a", ha="center", va="center", fontsize=8)
                continue
            r, g, b, _ = im.cmap(im.norm(m[i, j]))
            dark = 0.299 * r + 0.587 * g + 0.114 * b < 0.5
            ax.text(j, i, fmt_cell(m[i, j]) + (suffix[i][j] if suffix else ""), ha="center",
                    va="center", fontsize=8, color="white" if dark else "black")
    ax.set_xticks(range(len(cvals)))
    ax.set_xticklabels([str(v) for v in cvals])
    ax.set_xlabel(col or "")
    ax.set_yticks(range(len(rkeys)))
    ax.set_yticklabels([", ".join(str(x) for x in k) for k in rkeys] if rows else [""])
    ax.set_ylabel(", ".join(rows))
    ax.set_title(title)
    fig.colorbar(im, ax=ax)
    page.figure(fid, fig, caption)
    return True


def _pareto_mask(x, y):
    """Points not dominated for (lower x, higher y)."""
    keep = []
    for i in range(len(x)):
        dom = any((x[j] <= x[i] and y[j] >= y[i]) and (x[j] < x[i] or y[j] > y[i])
                  for j in range(len(x)))
        keep.append(not dom)
    return np.array(keep, dtype=bool)


def _pareto(page, fid, x, y, labels, xlabel, ylabel, caption):
    ok = ~(np.isnan(x) | np.isnan(y))
    if not ok.any():
        return False
    x, y = x[ok], y[ok]
    labels = [l for l, k in zip(labels, ok) if k]
    front = _pareto_mask(x, y)
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.scatter(x[~front], y[~front], color="#999", label="dominated")
    ax.scatter(x[front], y[front], color="#c44e52", label="Pareto frontier", zorder=3)
    order = np.argsort(x[front])
    ax.plot(x[front][order], y[front][order], color="#c44e52", lw=1, drawstyle="steps-post")
    for xi, yi, l in zip(x, y, labels):
        ax.annotate(l, (xi, yi), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if x.min() > 0 and x.max() / x.min() > 50:
        ax.set_xscale("log")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    page.figure(fid, fig, caption + f" {int(front.sum())} of {len(x)} configurations on the "
                "frontier (red).")
    return True


def _gpu_hours_per_million(num_gpus, tokens_per_s):
    if tokens_per_s is None or not tokens_per_s > 0 or num_gpus is None:
        return math.nan
    return num_gpus * 1e6 / (tokens_per_s * 3600.0)


def build_sweep(page, df, params, gpu_price, path):
    ok = df[df["status"] == "ok"]
    nerr = int((df["status"] != "ok").sum())
    page.section("summary", "Sweep")
    page.table(["figure", "value"], [
        ("file", path), ("runs", fmt(len(df))), ("configurations", fmt(df["config_idx"].nunique())),
        ("parameters", ", ".join(params) or "none"),
        ("runs not ok", f"{nerr}" + (": " + "; ".join(
            f"config {r.config_idx}: {r.status} {r.error}" for r in
            df[df["status"] != "ok"].head(5).itertuples()) if nerr else "")),
    ], tid="summary-table", left_cols=2)
    agg_cols = ["num_gpus", "slo_attainment", "ttft_p99_ms", "tpot_p99_ms", "tpot_p50_ms",
                "e2e_p99_ms", "input_tokens_per_s", "output_tokens_per_s", "goodput_req_per_s",
                "requests_per_s", "gpu_price_per_hour"]
    agg_cols = [c for c in agg_cols if c in ok]
    if len(ok) == 0:
        page.section("slo", "SLO attainment grid")
        page.missing("fig-slo-grid", "no run of the sweep has status ok")
        page.section("pareto", "Pareto frontier")
        page.missing("fig-pareto", "no run of the sweep has status ok")
        page.section("cost", "Cost")
        page.note("n/a: no run of the sweep has status ok")
        return
    conf = ok.groupby("config_idx", sort=True).agg(
        {**{p: "first" for p in params}, **{c: "mean" for c in agg_cols},
         "seed": "count"}).rename(columns={"seed": "num_runs"}).reset_index()
    conf["label"] = [f"c{int(i)}" for i in conf["config_idx"]]
    conf["out_tok_s_per_gpu"] = conf["output_tokens_per_s"] / conf["num_gpus"]
    # Interactivity (docs/outputs.md): 1000 / TPOT p50, of the mean TPOT p50 over the seeds.
    conf["out_tok_s_per_user"] = (1000.0 / conf["tpot_p50_ms"] if "tpot_p50_ms" in conf
                                  else math.nan)
    # Each configuration's own price (its topology's, or the sweep's --gpu-price-per-hour);
    # the report's --gpu-price-per-hour replaces every one.
    if gpu_price:
        conf["price"] = float(gpu_price)
    else:
        conf["price"] = conf["gpu_price_per_hour"] if "gpu_price_per_hour" in conf else math.nan

    page.section("slo", "SLO attainment grid")
    if not _grid(page, "fig-slo-grid", conf, params, "slo_attainment",
                 "SLO attainment (met / decided)",
                 "Mean over seeds of slo_attainment (met / decided requests under the scenario's "
                 "[slo], docs/outputs.md) per configuration; n/a where no request was decided.",
                 lambda v: f"{100 * v:.1f}%", vmin=0, vmax=1):
        page.missing("fig-slo-grid", "no configuration decided a request (slo_attainment empty "
                     "in every row)")

    page.section("pareto", "Pareto frontier")
    lat = "ttft_p99_ms" if conf["ttft_p99_ms"].notna().any() else None
    drawn = False
    if lat:
        drawn = _pareto(page, "fig-pareto", conf[lat].to_numpy(float),
                        conf["out_tok_s_per_gpu"].to_numpy(float), conf["label"].tolist(),
                        "TTFT p99 (ms, mean over seeds)", "output tokens/s per GPU",
                        "Output tokens per second per GPU against TTFT p99, one point per "
                        "configuration (cN = config_idx, parameters in the cost table); the "
                        "frontier holds those no other configuration beats on both.")
    if not drawn:
        page.missing("fig-pareto", "no configuration has both a TTFT p99 and an output "
                     "throughput (no request got a first token)")
    if conf["tpot_p99_ms"].notna().any():
        _pareto(page, "fig-pareto-tpot", conf["tpot_p99_ms"].to_numpy(float),
                conf["out_tok_s_per_gpu"].to_numpy(float), conf["label"].tolist(),
                "TPOT p99 (ms, mean over seeds)", "output tokens/s per GPU",
                "The same against TPOT p99 (the decode-speed side of the trade).")
    else:
        page.missing("fig-pareto-tpot", "no request completed with two or more output tokens")

    page.section("cost", "Cost")
    limits = None
    if "feasible" in df:
        # The sweep's own verdict (docs/sweeps.md, "Planner outputs"): every run of the
        # configuration feasible under its feasible_limits.
        feasible = df.groupby("config_idx")["feasible"].apply(lambda s: bool((s == True).all()))
        conf["feasible_csv"] = conf["config_idx"].map(feasible)
        limits = df["feasible_limits"].dropna().unique() if "feasible_limits" in df else []
        limits = limits[0] if len(limits) == 1 else None
    if "feasible_csv" in conf:
        conf["feasible"] = conf["feasible_csv"].astype(bool)
    else:  # a CSV of an older moesim, without the planner columns
        conf["feasible"] = conf["slo_attainment"] >= MIN_ATTAINMENT
    _sweep_cost(page, conf, params, limits)
    sources = (["report --gpu-price-per-hour"] if gpu_price else
               df["gpu_price_source"].tolist() if "gpu_price_source" in df else [])
    _describe_sweep(page, df, conf, params, limits, path, sources)


def _prices_text(prices, sources):
    """The GPU prices of the configurations, with where they came from."""
    prices = sorted(set(float(p) for p in prices if not pd.isna(p)))
    if not prices:
        return "no GPU price: costs in GPU-hours"
    src = ", ".join(sorted(set(str(x) for x in sources if isinstance(x, str) and x)))
    return ("$" + " / $".join(f"{p:g}" for p in prices) + " per GPU-hour"
            + (f" ({src})" if src else ""))


def _measured_window_lines(rows):
    """Banner lines on the measured windows of the runs (the sweep CSV's "converged" column,
    docs/outputs.md "Steady state"): how many did not converge, whose verdicts are unknown."""
    if "converged" not in rows.columns or rows.empty:
        return []
    bad = rows[rows["converged"].astype(str) == "no"]
    if bad.empty:
        return [f"all {len(rows)} runs converged (steady state, or a finite workload served)"]
    return [f"{len(bad)} of {len(rows)} runs did NOT CONVERGE: their verdicts are unknown, not "
            f"met (run longer: [run] duration_s or max_duration_s)"]


def _describe_sweep(page, df, conf, params, limits, path, sources):
    """The sweep at the top of the page and the verdict banner: which configurations meet the
    SLO."""
    ok = df[df["status"] == "ok"]
    gpus = sorted(set(int(g) for g in conf["num_gpus"].dropna()))
    lines = [f"sweep {os.path.basename(path)}: {len(conf)} configurations that ran "
             f"({df['config_idx'].nunique()} in the grid) over "
             f"{', '.join(params) or 'no parameters'}, {len(ok)} runs with status ok",
             f"GPUs per configuration: {', '.join(str(g) for g in gpus) or 'n/a'}; price: "
             f"{_prices_text(conf['price'], sources)}"]
    lines += _measured_window_lines(ok)
    feas = conf[conf["feasible"]]
    rule = f"every run meets {limits}" if limits else f"mean attainment >= {100 * MIN_ATTAINMENT:g}%"
    if len(feas):
        kind = "meets"
        text = (f"{len(feas)} of {len(conf)} configurations MEET the SLO ({rule}): "
                + ", ".join(feas["label"].tolist()))
    else:
        kind = "misses"
        text = f"no configuration meets the SLO ({rule})"
    page.describe(lines, kind, text)


def _sweep_cost(page, conf, params, limits=None):
    rows = []
    conf = conf.copy()
    conf["gpuh_out"] = [_gpu_hours_per_million(g, t) for g, t in
                        zip(conf["num_gpus"], conf["output_tokens_per_s"])]
    conf["gpuh_in"] = [_gpu_hours_per_million(g, t) for g, t in
                       zip(conf["num_gpus"], conf["input_tokens_per_s"])]
    usd = bool(conf["price"].notna().all()) and len(conf) > 0
    conf["usd_out"] = conf["gpuh_out"] * conf["price"]
    conf["usd_in"] = conf["gpuh_in"] * conf["price"]
    cost_col = "usd_out" if usd else "gpuh_out"
    conf = conf.sort_values([cost_col, "config_idx"], na_position="last")
    header = ["config", "parameters", "GPUs", "runs", "output tok/s", "tok/s per GPU",
              "tok/s per user", "SLO attainment", "feasible", "GPU-h / M output tok",
              "GPU-h / M input tok"]
    if usd:
        header += ["$ / GPU-hour", "$ / M output tok", "$ / M input tok"]
    for r in conf.itertuples():
        att = r.slo_attainment
        row = [r.label, _label(params, conf.loc[r.Index]), fmt(r.num_gpus), fmt(r.num_runs),
               fmt(r.output_tokens_per_s), fmt(r.out_tok_s_per_gpu), fmt(r.out_tok_s_per_user),
               "n/a" if pd.isna(att) else f"{100 * att:.1f}%", "yes" if r.feasible else "no",
               fmt(r.gpuh_out), fmt(r.gpuh_in)]
        if usd:
            row += [fmt(r.price), fmt(r.usd_out), fmt(r.usd_in)]
        rows.append(row)
    page.table(header, rows, tid="cost-table", left_cols=2)
    feas = conf[conf["feasible"] & conf[cost_col].notna()]
    rule = (f"every run meets {limits}" if "feasible_csv" in conf and limits
            else f"mean attainment >= {100 * MIN_ATTAINMENT:g}%")
    if len(feas):
        best = feas.iloc[0]
        cost = (f"${fmt(best['usd_out'])} per million output tokens (${fmt(best['usd_in'])} per "
                f"million input tokens) at ${best['price']:g} per GPU-hour" if usd else
                f"{fmt(best['gpuh_out'])} GPU-hours per million output tokens "
                f"({fmt(best['gpuh_in'])} per million input tokens); no GPU price for every "
                "configuration: give --gpu-price-per-hour USD for dollars")
        page.note(f"Cheapest SLO-feasible configuration ({rule}): {best['label']} "
                  f"({_label(params, best)}), {cost}, {fmt(best['out_tok_s_per_user'])} output "
                  "tokens/s per user.")
    else:
        page.note(f"No configuration is SLO-feasible ({rule}).")
    page.note("Cost per million tokens = GPUs / (tokens/s x 3600) x 1e6 GPU-hours at the run's "
              "measured throughput (input and output tokens counted separately, each as if it "
              "alone paid for the GPUs), times each configuration's own GPU price; sorted by "
              "output cost. Tokens/s per user = 1000 / TPOT p50 (ms).")


def build_search(page, doc, gpu_price, path):
    configs = doc["configs"]
    params = []
    for c in configs:
        for k in (c.get("parameters") or {}):
            if k not in params:
                params.append(k)
    rows = []
    for c in configs:
        r = {"config_idx": c["config_idx"], "label": f"c{c['config_idx']}",
             "error": c.get("error"), "num_gpus": c.get("num_gpus"),
             "max_rate": c.get("max_rate_per_s"), "mult": c.get("max_multiplier"),
             "unit": c.get("rate_unit", "req/s"), "found": c.get("found", False),
             # Met at the highest probe (no failing rate above it): a lower bound.
             "bound": "+" if c.get("found") and c.get("first_failing_rate_per_s") is None
             and c.get("max_rate_per_s") is not None else "",
             "feasible": bool(c.get("feasible")),
             "price": gpu_price or c.get("gpu_price_per_hour"),
             "source": c.get("gpu_price_source"),
             "per_gpu": c.get("output_tokens_per_s_per_gpu"),
             "per_user": c.get("output_tokens_per_s_per_user"),
             "gpuh_out": c.get("gpu_hours_per_m_output_tokens"),
             "gpuh_in": c.get("gpu_hours_per_m_input_tokens")}
        for p in params:
            r[p] = (c.get("parameters") or {}).get(p)
        rows.append(r)
    t = pd.DataFrame(rows)
    t["max_rate_f"] = pd.to_numeric(t["max_rate"], errors="coerce")
    slo = doc.get("slo", {})
    page.section("summary", "Search")
    page.table(["figure", "value"], [
        ("file", path), ("scenario", doc.get("scenario")),
        ("SLO", ", ".join(f"{k}={v}" for k, v in slo.items())),
        ("configurations", fmt(len(configs))),
        ("not searched (error)", fmt(int(t["error"].notna().sum()))),
        ("target rate", fmt(doc.get("target_rate_per_s"))),
        ("cheapest for the target", "n/a" if doc.get("cheapest_config_idx") is None
         else f"c{doc['cheapest_config_idx']}"),
    ], tid="summary-table", left_cols=2)
    unit = t["unit"].dropna().iloc[0] if t["unit"].notna().any() else "req/s"

    page.section("slo", "SLO grid: highest rate meeting the SLOs")
    if not _grid(page, "fig-slo-grid", t, params, "max_rate_f",
                 f"max rate meeting the SLOs ({unit})",
                 "The highest probed rate that met every SLO per configuration (moesim search); "
                 "a + marks a lower bound (every probe met: --max-doublings reached); n/a where "
                 "no probed rate met them or the configuration did not parse.",
                 lambda v: f"{v:.4g}", cmap="viridis", suffix_col="bound"):
        page.missing("fig-slo-grid", "no configuration met the SLOs at any probed rate")
    probes = [(c, p) for c in configs for p in c.get("probes", [])]
    if probes:
        fig, ax = plt.subplots(figsize=(7, 3.5))
        for c in configs[:20]:
            ps = sorted(c.get("probes", []), key=lambda p: p["rate_per_s"])
            pts = [(p["rate_per_s"], p["attainment"]) for p in ps if p["attainment"] is not None]
            if pts:
                ax.plot(*zip(*pts), marker="o", ms=3, label=f"c{c['config_idx']}")
        ax.axhline(slo.get("min_attainment", 0.99), color="#c44e52", ls="--", lw=1)
        ax.set_xscale("log")
        ax.set_xlabel(f"probed rate ({unit})")
        ax.set_ylabel("SLO attainment")
        ax.legend(fontsize=6, ncol=2)
        ax.grid(alpha=0.3)
        page.figure("fig-search-probes", fig, "Attainment of every probe against its rate (first "
                    "20 configurations); the dashed line is the attainment limit.")
    else:
        page.missing("fig-search-probes", "no probes (every configuration failed to parse)")

    page.section("pareto", "Pareto frontier")
    t["rate_per_gpu"] = t["max_rate_f"] / pd.to_numeric(t["num_gpus"], errors="coerce")
    if not _pareto(page, "fig-pareto", pd.to_numeric(t["num_gpus"], errors="coerce")
                   .to_numpy(float), t["max_rate_f"].to_numpy(float), t["label"].tolist(),
                   "GPUs", f"highest rate meeting the SLOs ({unit})",
                   "Highest SLO-meeting rate against the GPU count, one point per configuration "
                   "that met the SLOs at some rate (cN = config_idx, parameters in the cost "
                   "table); on the frontier no other configuration sustains more with as few "
                   "GPUs."):
        page.missing("fig-pareto", "no configuration met the SLOs at any probed rate")

    page.section("cost", "Cost")
    priced = [r for r in rows if not r["error"]]
    usd = bool(priced) and all(r["price"] is not None for r in priced)
    header = ["config", "parameters", "GPUs", f"max rate ({unit})", "x base",
              "out tok/s per GPU", "out tok/s per user", "GPU-h / M output tok",
              "GPU-h / M input tok"] + (["$ / GPU-hour", "$ / M output tok", "$ / M input tok"]
                                        if usd else [])
    out = []
    t = t.sort_values(["rate_per_gpu", "config_idx"], ascending=[False, True],
                      na_position="last")
    for r in t.itertuples():
        if isinstance(r.error, str):
            out.append([r.label, _label(params, t.loc[r.Index]), "n/a", "error: " + r.error[:80]]
                       + [""] * (len(header) - 4))
            continue
        row = [r.label, _label(params, t.loc[r.Index]), fmt(r.num_gpus),
               "n/a (meets at no probed rate)" if pd.isna(r.max_rate_f)
               else fmt(r.max_rate_f) + (" (lower bound)" if r.bound else ""),
               fmt(r.mult), fmt(r.per_gpu), fmt(r.per_user), fmt(r.gpuh_out), fmt(r.gpuh_in)]
        if usd:
            row += [fmt(r.price)] + [fmt(g * r.price) if g is not None and not pd.isna(g)
                                     else "n/a" for g in (r.gpuh_out, r.gpuh_in)]
        out.append(row)
    page.table(header, out, tid="cost-table", left_cols=2)
    page.note("Per GPU, per user (1000 / TPOT p50 in ms) and cost at the highest rate that met "
              "the SLOs: GPU-hours per million tokens = GPUs / (tokens/s x 3600) x 1e6, input "
              "and output each as if it alone paid for the GPUs"
              + (", times each configuration's own GPU price." if usd else
                 "; no GPU price for every configuration: give --gpu-price-per-hour for dollars."))
    _describe_search(page, doc, t, usd, gpu_price)


def _describe_search(page, doc, t, usd, gpu_price):
    """The search at the top of the page and the verdict banner: which configurations meet the
    SLOs at some rate (or, with a target rate, at it)."""
    ok = t[t["error"].isna()]
    gpus = sorted(set(int(g) for g in ok["num_gpus"].dropna()))
    sources = ["report --gpu-price-per-hour"] if gpu_price else ok["source"].tolist()
    slo = ", ".join(f"{k}={v}" for k, v in doc.get("slo", {}).items())
    lines = [f"search of {doc.get('scenario')}: {len(t)} configurations, {len(ok)} searched",
             f"GPUs per configuration: {', '.join(str(g) for g in gpus) or 'n/a'}; price: "
             f"{_prices_text(ok['price'].tolist(), sources)}"]
    lines += _measured_window_lines(ok)
    target = doc.get("target_rate_per_s")
    rule = doc.get("feasible_rule") or (f"meets {slo} at a max rate of at least the target "
                                        f"{target}" if target else f"meets {slo} at some rate")
    feas = t[t["feasible"]]
    if len(feas):
        page.describe(lines, "meets", f"{len(feas)} of {len(t)} configurations feasible ({rule}): "
                      + ", ".join(feas["label"].tolist()))
    else:
        page.describe(lines, "misses", f"no configuration is feasible ({rule})")
