"""build_report: the HTML text of a run directory, sweep CSV or search JSON."""

import os

from . import run_report, study_report
from .markup import Page
from .inputs import RunData, detect, read_search, read_sweep


def build_report(path, gpu_price_per_hour=None, title=None):
    """Returns (html, kind). Raises BadInput for an input that is not a moesim output.
    gpu_price_per_hour prices every configuration of a sweep or search; without it each keeps the
    price its planner figures used (its --gpu-price-per-hour or its topology's)."""
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
        page = Page(title or f"moesim sweep: {os.path.basename(p)}", os.path.abspath(p))
        study_report.build_sweep(page, df, params, gpu_price_per_hour, p)
    else:
        doc = read_search(p)
        page = Page(title or f"moesim search: {doc.get('scenario')}", os.path.abspath(p))
        study_report.build_search(page, doc, gpu_price_per_hour, p)
    return page.render(), kind
