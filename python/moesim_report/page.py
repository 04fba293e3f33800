"""build_report: the HTML text of a run directory, sweep CSV or search JSON; write_report: the
page written atomically to a file."""

import os

from . import run_report, study_report
from .bad_input import in_file
from .markup import Page
from .inputs import RunData, detect, read_search, read_sweep


class WriteError(OSError):
    """The page could not be written (exit code 1); filename is the page's path."""


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


def check_out(out):
    """BadInput when `out` cannot be the page: a directory, or in a directory that does not
    exist or is not writable (checked before any work)."""
    out_dir = os.path.dirname(os.path.abspath(out))
    if os.path.isdir(out):
        raise in_file(out, "--out: is a directory")
    if not os.path.isdir(out_dir):
        raise in_file(out, f"--out: directory {out_dir} does not exist")
    if not os.access(out_dir, os.W_OK | os.X_OK):
        raise in_file(out, f"--out: directory {out_dir} is not writable")


def write_report(path, out, gpu_price_per_hour=None, title=None):
    """Writes the page of `path` to `out` (a temporary file beside it, fsync'd and renamed over
    it); returns (kind, bytes written). BadInput for bad input or a bad `out`; WriteError (with
    filename and errno) when the page cannot be written."""
    check_out(out)
    html, kind = build_report(path, gpu_price_per_hour=gpu_price_per_hour, title=title)
    data = html.encode("utf-8")
    tmp = os.path.join(os.path.dirname(os.path.abspath(out)),
                       f".{os.path.basename(out)}.tmp.{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, out)
    except OSError as e:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise WriteError(e.errno, e.strerror, out) from None
    return kind, len(data)
