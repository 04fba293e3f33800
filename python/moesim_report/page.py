"""build_report: the HTML text of a run directory, sweep CSV or search JSON."""

import os

from . import run_report, study_report
from .markup import Page
from .inputs import RunData, detect, read_search, read_sweep


def _one_price(prices):
    """The GPU price the sweep or search itself used (its planner columns: --gpu-price-per-hour or
    the topology's [gpu] price_usd_per_hour) when every configuration has the same one, else
    None."""
    prices = set(float(p) for p in prices)
    return prices.pop() if len(prices) == 1 else None


def build_report(path, gpu_price_per_hour=None, title=None):
    """Returns (html, kind). Raises BadInput for an input that is not a moesim output. Without
    gpu_price_per_hour the price the input's planner figures used, when it is one."""
    kind, p = detect(path)
    if kind == "run":
        run = RunData(p)
        s = run.summary
        page = Page(title or f"moesim run: {s.get('scenario')}",
                    f"{os.path.abspath(p)} - model {s.get('model')}, topology "
                    f"{s.get('topology')}, seed {s.get('seed')}, digest {s.get('event_digest')}")
        run_report.build(page, run)
    elif kind == "sweep":
        df, params = read_sweep(p)
        if gpu_price_per_hour is None and "gpu_price_per_hour" in df:
            gpu_price_per_hour = _one_price(df["gpu_price_per_hour"].dropna().tolist())
        page = Page(title or f"moesim sweep: {os.path.basename(p)}", os.path.abspath(p))
        study_report.build_sweep(page, df, params, gpu_price_per_hour, p)
    else:
        doc = read_search(p)
        if gpu_price_per_hour is None:
            gpu_price_per_hour = _one_price([c["gpu_price_per_hour"] for c in doc["configs"]
                                             if c.get("gpu_price_per_hour") is not None])
        page = Page(title or f"moesim search: {doc.get('scenario')}", os.path.abspath(p))
        study_report.build_search(page, doc, gpu_price_per_hour, p)
    return page.render(), kind
