"""Which moesim output a path is, and reading it.

A run directory holds summary.json (moesim run --out DIR); requests.csv, steps.csv, trace.json,
resolved/run.json and a step trace (any *.jsonl whose first record is the step-trace header,
e.g. from --record DIR/steps.jsonl) are used when present. A sweep is a CSV whose header starts
with run_idx,num_runs,config_idx (or a directory holding exactly one such CSV and no
summary.json). A search is a JSON document with "configs" whose entries carry "probes" or
"error" (moesim search --json)."""

import json
import math
import os

from . import csv_tables, json_checks
from .bad_input import BadInput, at_key, in_file

SWEEP_HEADER = "run_idx,num_runs,config_idx"
STEP_TRACE_SCHEMA = "moesim.step_trace.v1"


def _first_line(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.readline()
    except OSError as e:
        raise in_file(path, e.strerror or str(e)) from None


def _is_sweep_csv(path):
    return path.endswith(".csv") and _first_line(path).startswith(SWEEP_HEADER)


class _NotFinite(ValueError):
    pass


def _finite_float(text):
    v = float(text)
    if not math.isfinite(v):
        raise _NotFinite(f"the number {text[:40]} is beyond double's range")
    return v


def _refuse_constant(name):
    raise _NotFinite(f"{name} is not JSON (moesim writes null for a missing figure)")


def _loads(text):
    """json.loads, refusing NaN, Infinity and numbers beyond double's range (which Python's
    json reads as float nan / inf), which moesim never writes."""
    return json.loads(text, parse_float=_finite_float, parse_constant=_refuse_constant)


def _read_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return _loads(f.read())
    except OSError as e:
        raise in_file(path, e.strerror or str(e)) from None
    except json.JSONDecodeError as e:
        raise BadInput(f"{path}:{e.lineno}: not JSON: {e.msg}", file=path, line=e.lineno,
                       reason=f"not JSON: {e.msg}") from None
    except _NotFinite as e:
        raise in_file(path, str(e)) from None
    except (RecursionError, UnicodeDecodeError, ValueError) as e:
        raise in_file(path, f"not a JSON document moesim writes: {type(e).__name__}") from None


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
        raise in_file(path, "no such file or directory")
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
            raise in_file(path, "holds several sweep/search outputs "
                      f"({', '.join(os.path.basename(p) for p in sweeps + searches)}); name one")
        raise in_file(path, "not a moesim output: no summary.json (moesim run --out DIR), sweep "
                      "CSV (moesim sweep --out FILE.csv) or search JSON (moesim search --json)")
    if _is_sweep_csv(path):
        return "sweep", path
    if path.endswith(".json"):
        doc = _read_json(path)
        if _is_search(doc):
            return "search", path
        if isinstance(doc, dict) and "event_digest" in doc:
            return "run", os.path.dirname(path) or "."
    raise in_file(path, "not a moesim output: want a run directory (moesim run --out DIR), a "
                  "sweep CSV whose header starts with run_idx,num_runs,config_idx, or a search "
                  "JSON (moesim search --json)")


class RunData:
    """One run directory's outputs; a missing optional file is None."""

    def __init__(self, directory):
        self.dir = directory
        j = lambda n: os.path.join(directory, n)  # noqa: E731
        self.summary = _read_json(j("summary.json"))
        if not isinstance(self.summary, dict) or "event_digest" not in self.summary:
            raise in_file(j("summary.json"), "not a moesim run summary (no event_digest)")
        json_checks.check_summary(self.summary, j("summary.json"))
        self.requests = (csv_tables.read_requests(j("requests.csv"))
                         if os.path.isfile(j("requests.csv")) else None)
        self.steps = (csv_tables.read_steps(j("steps.csv"))
                      if os.path.isfile(j("steps.csv")) else None)
        self.run_json = (json_checks.check_run_json(_read_json(j("resolved/run.json")),
                                                    j("resolved/run.json"))
                         if os.path.isfile(j("resolved/run.json")) else None)
        self.trace = None
        if os.path.isfile(j("trace.json")):
            self.trace = json_checks.check_trace(_read_json(j("trace.json")), j("trace.json"))
        self.step_trace_path = None
        for n in sorted(os.listdir(directory)):
            p = j(n)
            if n.endswith(".jsonl") and os.path.isfile(p) and STEP_TRACE_SCHEMA in _first_line(p):
                self.step_trace_path = p
                break

    def step_trace(self):
        """(header, step records) of the step trace, or None without one. The header comes
        first; each step's routing is checked against it (json_checks)."""
        if self.step_trace_path is None:
            return None
        path = self.step_trace_path
        header, steps, moe, num_gpus = None, [], None, 0
        try:
            with open(path, encoding="utf-8") as f:
                for lineno, line in enumerate(f, 1):
                    try:
                        rec = _loads(line)
                    except json.JSONDecodeError as e:
                        raise BadInput(f"{path}:{lineno}: not JSON: {e.msg}", file=path,
                                       line=lineno, reason=f"not JSON: {e.msg}") from None
                    except (_NotFinite, RecursionError) as e:
                        raise at_key(path, "", str(e) or type(e).__name__, lineno) from None
                    if not isinstance(rec, dict):
                        raise at_key(path, "", "a record is a JSON object", lineno)
                    kind = rec.get("record")
                    if kind == "header":
                        if header is not None:
                            raise at_key(path, "record", "a second header", lineno)
                        moe, num_gpus = json_checks.check_step_trace_header(rec, path, lineno)
                        header = rec
                    elif kind == "step":
                        if header is None:
                            raise at_key(path, "record", "a step before the header", lineno)
                        json_checks.check_step_record(
                            rec, path, lineno, moe, num_gpus,
                            may_hold_bools="true" in line or "false" in line)
                        steps.append(rec)
        except OSError as e:
            raise in_file(path, e.strerror or str(e)) from None
        except UnicodeDecodeError:
            raise in_file(path, "not UTF-8 text") from None
        return header, steps


def read_sweep(path):
    """(the checked sweep table, its parameter columns: those between seed and status)."""
    df = csv_tables.read_csv(path)
    cols = [str(c) for c in df.columns]
    if cols[:3] != ["run_idx", "num_runs", "config_idx"] or "status" not in cols:
        raise in_file(path, "not a moesim sweep CSV (header)")
    df = csv_tables.check_table(df, path, csv_tables.SWEEP, csv_tables.SWEEP_REQUIRED)
    csv_tables.check_sweep_rows(df, path)
    params = cols[cols.index("seed") + 1:cols.index("status")] if "seed" in cols else []
    for p in params:  # "values exactly as given": an empty one is the empty string
        df[p] = df[p].where(df[p].notna(), "")
    return df, params


def read_search(path):
    doc = _read_json(path)
    if not _is_search(doc):
        raise in_file(path, "not a moesim search document (moesim search --json)")
    return json_checks.check_search(doc, path)
