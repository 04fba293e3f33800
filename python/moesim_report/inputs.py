"""Which moesim output a path is, and reading it.

A run directory holds summary.json (moesim run --out DIR); requests.csv, steps.csv, trace.json,
resolved/run.json and a step trace (any *.jsonl whose first record is the step-trace header,
e.g. from --record DIR/steps.jsonl) are used when present. A sweep is a CSV whose header starts
with run_idx,num_runs,config_idx (or a directory holding exactly one such CSV and no
summary.json). A search is a JSON document with "configs" whose entries carry "probes" or
"error" (moesim search --json)."""

import json
import os

import pandas as pd

SWEEP_HEADER = "run_idx,num_runs,config_idx"
STEP_TRACE_SCHEMA = "moesim.step_trace.v1"


class BadInput(Exception):
    """The input is not a moesim output this report reads (exit code 2)."""


def _first_line(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.readline()
    except OSError as e:
        raise BadInput(f"{path}: {e.strerror}") from None


def _is_sweep_csv(path):
    return path.endswith(".csv") and _first_line(path).startswith(SWEEP_HEADER)


def _read_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        raise BadInput(f"{path}: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise BadInput(f"{path}:{e.lineno}: not JSON: {e.msg}") from None
    except (RecursionError, UnicodeDecodeError, ValueError) as e:
        raise BadInput(f"{path}: not a JSON document moesim writes: {type(e).__name__}") from None


def _looks_like_search(path):
    """Cheap test before parsing a directory's JSON files: moesim search --json writes its keys
    sorted, "configs" first."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return '"configs"' in f.read(4096)
    except OSError:
        return False


def _is_search(doc):
    return (isinstance(doc, dict) and isinstance(doc.get("configs"), list)
            and all(isinstance(c, dict) and ("probes" in c or "error" in c)
                    for c in doc["configs"]))


def detect(path):
    """Returns (kind, path) with kind "run", "sweep" or "search"; raises BadInput otherwise."""
    if not os.path.exists(path):
        raise BadInput(f"{path}: no such file or directory")
    if os.path.isdir(path):
        if os.path.isfile(os.path.join(path, "summary.json")):
            return "run", path
        sweeps = sorted(os.path.join(path, n) for n in os.listdir(path)
                        if _is_sweep_csv(os.path.join(path, n)))
        if len(sweeps) == 1:
            return "sweep", sweeps[0]
        searches = []
        for n in sorted(os.listdir(path)):
            p = os.path.join(path, n)
            if n.endswith(".json") and os.path.isfile(p) and _looks_like_search(p):
                try:
                    if _is_search(_read_json(p)):
                        searches.append(p)
                except BadInput:
                    pass
        if not sweeps and len(searches) == 1:
            return "search", searches[0]
        if len(sweeps) + len(searches) > 1:
            raise BadInput(f"{path}: holds several sweep/search outputs "
                           f"({', '.join(os.path.basename(p) for p in sweeps + searches)}); "
                           "name one")
        raise BadInput(f"{path}: not a moesim output: no summary.json (moesim run --out DIR), "
                       "sweep CSV (moesim sweep --out FILE.csv) or search JSON "
                       "(moesim search --json)")
    if _is_sweep_csv(path):
        return "sweep", path
    if path.endswith(".json"):
        doc = _read_json(path)
        if _is_search(doc):
            return "search", path
        if isinstance(doc, dict) and "event_digest" in doc:
            return "run", os.path.dirname(path) or "."
    raise BadInput(f"{path}: not a moesim output: want a run directory (moesim run --out DIR), "
                   "a sweep CSV whose header starts with run_idx,num_runs,config_idx, or a "
                   "search JSON (moesim search --json)")


def _read_csv(path, **kw):
    try:
        return pd.read_csv(path, **kw)
    except (OSError, ValueError, pd.errors.ParserError) as e:
        raise BadInput(f"{path}: cannot read as CSV: {e}") from None


class RunData:
    """One run directory's outputs; a missing optional file is None."""

    def __init__(self, directory):
        self.dir = directory
        j = lambda n: os.path.join(directory, n)  # noqa: E731
        self.summary = _read_json(j("summary.json"))
        if not isinstance(self.summary, dict) or "event_digest" not in self.summary:
            raise BadInput(f"{j('summary.json')}: not a moesim run summary (no event_digest)")
        self.requests = _read_csv(j("requests.csv")) if os.path.isfile(j("requests.csv")) else None
        self.steps = _read_csv(j("steps.csv")) if os.path.isfile(j("steps.csv")) else None
        self.run_json = (_read_json(j("resolved/run.json"))
                         if os.path.isfile(j("resolved/run.json")) else None)
        self.trace = None
        if os.path.isfile(j("trace.json")):
            t = _read_json(j("trace.json"))
            self.trace = t.get("traceEvents", []) if isinstance(t, dict) else t
        self.step_trace_path = None
        for n in sorted(os.listdir(directory)):
            p = j(n)
            if n.endswith(".jsonl") and os.path.isfile(p) and STEP_TRACE_SCHEMA in _first_line(p):
                self.step_trace_path = p
                break

    def step_trace(self):
        """(header, step records) of the step trace, or None without one."""
        if self.step_trace_path is None:
            return None
        header, steps = None, []
        with open(self.step_trace_path, encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as e:
                    raise BadInput(f"{self.step_trace_path}:{lineno}: not JSON: {e.msg}") from None
                if rec.get("record") == "header":
                    header = rec
                elif rec.get("record") == "step":
                    steps.append(rec)
        return header, steps


def read_sweep(path):
    df = _read_csv(path)
    cols = list(df.columns)
    if cols[:3] != ["run_idx", "num_runs", "config_idx"] or "status" not in cols:
        raise BadInput(f"{path}: not a moesim sweep CSV (header)")
    params = cols[cols.index("seed") + 1:cols.index("status")] if "seed" in cols else []
    return df, params


def read_search(path):
    doc = _read_json(path)
    if not _is_search(doc):
        raise BadInput(f"{path}: not a moesim search document (moesim search --json)")
    return doc
