"""Checks of the JSON documents the report reads against what moesim writes: summary.json and
resolved/run.json (docs/outputs.md), trace.json (Chrome trace events), the step trace
(docs/schemas/step_trace.md) and the search document (docs/sweeps.md).

Each value the page uses is checked for its type and range before any figure is drawn, so that
a wrong-typed, negative, out-of-range or missing value is bad input naming the file and key path
(exit 2), never a traceback or a figure drawn from garbage. Keys the page does not use are not
checked; unknown keys are allowed (a newer moesim may add some). Non-finite numbers never reach
here: the JSON reader refuses NaN, Infinity and numbers beyond double's range (inputs.py).
"""

import math

import numpy as np

from .bad_input import at_key, quote

INT64_MAX = 2**63 - 1
MAX_GPUS = 2**20  # the topology reader's limit (docs/topologies.md)
MAX_EXPERTS = 2**16  # routed experts per layer the report draws (a heat map column each)
MAX_LAYERS = 2**12


def _describe(v):
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return f"the string {quote(v)}"
    if isinstance(v, dict):
        return "an object"
    if isinstance(v, list):
        return "a list"
    return quote(v)


_KIND_NAMES = {"int": "an integer", "num": "a number", "str": "a string", "bool": "true or false",
               "dict": "an object", "list": "a list"}


def _type_ok(v, kind):
    if kind == "int":
        return isinstance(v, int) and not isinstance(v, bool)
    if kind == "num":
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    return isinstance(v, {"str": str, "bool": bool, "dict": dict, "list": list}[kind])


class Checker:
    """Checked reads of one document (or one JSONL record: `line`), naming `file` and the key
    path of a bad value."""

    def __init__(self, file, line=0):
        self.file = file
        self.line = line

    def fail(self, path, reason):
        raise at_key(self.file, path, reason, self.line)

    def value(self, v, path, kind, lo=None, hi=None, above=None, null=False, choices=None):
        """v, checked: of `kind` ("int", "num", "str", "bool", "dict", "list"), null only when
        `null`, numbers in [lo, hi] (and > above), strings among `choices`."""
        if v is None:
            if null:
                return None
            self.fail(path, f"must be {_KIND_NAMES[kind]}, got null")
        if not _type_ok(v, kind):
            self.fail(path, f"must be {_KIND_NAMES[kind]}{' or null' if null else ''}, got "
                      f"{_describe(v)}")
        if kind in ("int", "num"):
            if isinstance(v, float) and not math.isfinite(v):
                self.fail(path, f"must be a finite number, got {v}")
            if kind == "int" and not -INT64_MAX - 1 <= v <= INT64_MAX:
                self.fail(path, f"{quote(v)} is beyond the 64-bit integer range")
            if lo is not None and v < lo:
                self.fail(path, f"must be >= {lo}, got {quote(v)}")
            if hi is not None and v > hi:
                self.fail(path, f"must be <= {hi}, got {quote(v)}")
            if above is not None and not v > above:
                self.fail(path, f"must be > {above}, got {quote(v)}")
        if choices is not None and v not in choices:
            self.fail(path, f"must be one of {', '.join(choices)}, got {_describe(v)}")
        return v

    def get(self, obj, key, prefix, kind, required=False, **limits):
        """obj[key] checked as value() does; None when absent and not `required`."""
        path = f"{prefix}.{key}" if prefix else key
        if key not in obj:
            if required:
                self.fail(path, f"missing (want {_KIND_NAMES[kind]})")
            return None
        return self.value(obj[key], path, kind, **limits)

    def fields(self, obj, prefix, spec):
        """Checks obj's keys of `spec`: {key: (kind, limits)}; a nested dict spec for an object."""
        for key, s in spec.items():
            if isinstance(s, dict):
                sub = self.get(obj, key, prefix, "dict")
                if sub is not None:
                    self.fields(sub, f"{prefix}.{key}" if prefix else key, s)
            else:
                kind, limits = s
                self.get(obj, key, prefix, kind, **limits)


def _n(kind, **limits):
    return (kind, limits)


NONNEG_OR_NULL = _n("num", lo=0, null=True)
FRACTION_OR_NULL = _n("num", lo=0, hi=1, null=True)
COUNT = _n("int", lo=0)
PERCENTILES = {k: NONNEG_OR_NULL for k in ("p50", "p90", "p99", "mean", "max")}
PERCENTILES["count"] = COUNT
SUMMARY = {
    "event_digest": _n("str", required=True),
    "scenario": _n("str"), "model": _n("str"), "topology": _n("str"), "fidelity": _n("str"),
    "seed": _n("int", lo=0), "num_events": COUNT, "simulated_s": _n("num", lo=0),
    "conservation_ok": _n("bool"),
    "requests": {"arrived": COUNT, "completed": COUNT, "rejected": COUNT, "in_flight": COUNT,
                 "waiting_first_token": COUNT, "max_wait_first_token_ms": NONNEG_OR_NULL},
    "throughput": {k: NONNEG_OR_NULL for k in ("input_tokens_per_s", "output_tokens_per_s",
                                               "completed_requests_per_s")},
    "slo": {"ttft_ms": _n("num", above=0, null=True), "tpot_ms": _n("num", above=0, null=True),
            "num_met": COUNT, "num_decided": COUNT, "attainment": FRACTION_OR_NULL,
            "goodput_requests_per_s": NONNEG_OR_NULL},
    "gpu_time_fraction": {k: NONNEG_OR_NULL for k in ("compute", "communication",
                                                      "barrier_wait")},
    "kv_high_water_fraction": FRACTION_OR_NULL, "prefix_cache_hit_rate": FRACTION_OR_NULL,
    "expert_gpu_imbalance_mean": NONNEG_OR_NULL, "expert_gpu_balancedness": FRACTION_OR_NULL,
    "memory_per_gpu": {k: NONNEG_OR_NULL for k in ("hbm_bytes", "weight_bytes", "kv_pool_bytes",
                                                   "kv_block_bytes", "num_kv_blocks")},
    "queueing_ms": PERCENTILES, "ttft_ms": PERCENTILES, "tpot_ms": PERCENTILES,
    "e2e_ms": PERCENTILES,
    "measurement": {"warmup_s": NONNEG_OR_NULL, "converged": _n("bool"),
                    "terminating": _n("bool"), "reason": _n("str", null=True),
                    "warmup": _n("str", null=True), "warmup_requests": _n("int", lo=0, null=True)},
}


def check_summary(doc, file):
    """summary.json (docs/outputs.md): the keys the page reads."""
    c = Checker(file)
    c.value(doc, "(document)", "dict")
    c.fields(doc, "", SUMMARY)
    counters = c.get(doc, "counters", "", "dict") or {}
    for k, v in counters.items():
        if isinstance(v, dict):  # per op kind: kind -> count
            for kind, n in v.items():
                c.value(n, f"counters.{k}.{kind}", "num", lo=0)
        else:
            c.value(v, f"counters.{k}", "num", lo=0)
    for k, v in (c.get(doc, "actions", "", "dict", null=True) or {}).items():
        c.value(v, f"actions.{k}", "int", lo=0)
    for k, v in (c.get(doc, "policy_metrics", "", "dict", null=True) or {}).items():
        c.value(v, f"policy_metrics.{k}", "num", null=True)
    return doc


def check_run_json(doc, file):
    """resolved/run.json: the deployment figures the page's description reads."""
    c = Checker(file)
    c.value(doc, "(document)", "dict")
    for k in ("replicas", "gpus_per_replica", "max_seqs"):
        c.get(doc, k, "", "int", lo=1, null=True)
    return doc


def check_trace(doc, file):
    """trace.json: the Chrome trace events the timeline, GPU-time and action figures read.
    Events of other phases than M, X, i and I are ignored by the page and not checked."""
    c = Checker(file)
    if isinstance(doc, dict):
        events = c.get(doc, "traceEvents", "", "list", required=True)
        prefix = "traceEvents"
    else:
        events = c.value(doc, "(document)", "list")
        prefix = ""
    for i, e in enumerate(events):
        p = f"{prefix}[{i}]"
        c.value(e, p, "dict")
        ph = c.get(e, "ph", p, "str")
        if ph not in ("M", "X", "i", "I"):
            continue
        c.get(e, "name", p, "str", required=True)
        c.get(e, "pid", p, "int", required=ph == "X", lo=0)
        c.get(e, "tid", p, "int", required=ph == "X", lo=0)
        args = c.get(e, "args", p, "dict")
        if ph == "X":
            c.get(e, "ts", p, "num", required=True, lo=0)
            c.get(e, "dur", p, "num", required=True, lo=0)
            if args is not None:
                c.get(args, "layer", p + ".args", "int", lo=0)
            if e["name"] == "experts" and (args is None or "layer" not in args):
                c.fail(p + ".args.layer", "missing: an experts span names its layer")
        elif ph in ("i", "I"):
            c.get(e, "ts", p, "num", required=True, lo=0)
        elif e["name"] == "thread_name" and args is not None:
            c.get(args, "name", p + ".args", "str")
    return events


def check_step_trace_header(rec, file, line):
    """The step trace's header: the MoE layers (and their routed experts) and the replicas'
    GPUs, which size the heat maps. Returns ({MoE layer: routed experts}, number of GPUs)."""
    c = Checker(file, line)
    model = c.get(rec, "model", "", "dict", required=True)
    layers = c.get(model, "layers", "model", "list", required=True)
    if len(layers) > MAX_LAYERS:
        c.fail("model.layers", f"{len(layers)} layers, more than the {MAX_LAYERS} the report "
               "draws")
    moe = {}
    for i, layer in enumerate(layers):
        p = f"model.layers[{i}]"
        c.value(layer, p, "dict")
        idx = c.get(layer, "layer", p, "int", required=True, lo=0, hi=MAX_LAYERS - 1)
        ffn = c.get(layer, "ffn", p, "dict")
        if ffn is not None and c.get(ffn, "kind", p + ".ffn", "str") == "moe":
            if idx in moe:
                c.fail(p + ".layer", f"MoE layer {idx} listed twice")
            moe[idx] = c.get(ffn, "num_routed_experts", p + ".ffn", "int", required=True, lo=1,
                             hi=MAX_EXPERTS)
    num_gpus = 0
    for i, r in enumerate(c.get(rec, "replicas", "", "list") or []):
        p = f"replicas[{i}]"
        c.value(r, p, "dict")
        for j, g in enumerate(c.get(r, "gpus", p, "list") or []):
            num_gpus = max(num_gpus, c.value(g, f"{p}.gpus[{j}]", "int", lo=0,
                                             hi=MAX_GPUS - 1) + 1)
    return moe, num_gpus


def _check_entry(c, q, entry, experts, num_gpus):
    if not (isinstance(entry, list) and len(entry) == 4 and all(_type_ok(x, "int") for x in entry)):
        c.fail(q, "must be [source GPU, expert, destination GPU, count] (4 integers), got "
               + quote(entry))
    src, e, dst, n = entry
    if not 0 <= e < experts:
        c.fail(q, f"expert {e} outside the layer's {experts} routed experts")
    for what, g in (("source", src), ("destination", dst)):
        if not 0 <= g < max(num_gpus, 1):
            c.fail(q, f"{what} GPU {g} outside the header's {num_gpus} GPUs")
    if not 0 <= n <= INT64_MAX:
        c.fail(q, f"count {n} must be >= 0")


def _entries_ok(routing, experts, num_gpus):
    """True when every entry is 4 integers in range, checked as one array (a step trace holds
    millions of entries: 0.04 us each here against ~1 us one by one). Booleans, which numpy
    reads as integers, must have been ruled out by the caller."""
    try:
        a = np.array(routing)
    except (ValueError, OverflowError):
        return False
    if a.ndim != 2 or a.shape[1] != 4 or a.dtype.kind != "i":
        return False
    gpus = max(num_gpus, 1)
    return bool(((a[:, 1] >= 0) & (a[:, 1] < experts) & (a[:, 0] >= 0) & (a[:, 0] < gpus)
                 & (a[:, 2] >= 0) & (a[:, 2] < gpus) & (a[:, 3] >= 0)).all())


def check_step_record(rec, file, line, moe, num_gpus, may_hold_bools=True):
    """A step record's MoE layers: each routing entry [source GPU, expert, destination GPU,
    count] in the ranges of the header (an expert below the layer's routed experts, a GPU of a
    replica). may_hold_bools: False when the record's text has no true / false."""
    c = Checker(file, line)
    for i, layer in enumerate(c.get(rec, "layers", "", "list") or []):
        p = f"layers[{i}]"
        c.value(layer, p, "dict")
        idx = c.get(layer, "layer", p, "int", required=True, lo=0)
        routing = c.get(layer, "routing", p, "list") or []
        if routing and idx not in moe:
            c.fail(p + ".layer", f"layer {idx} has routing but is not a MoE layer of the header")
        experts = moe.get(idx, 0)
        if not may_hold_bools and _entries_ok(routing, experts, num_gpus):
            continue
        for j, entry in enumerate(routing):  # names the first bad entry
            _check_entry(c, f"{p}.routing[{j}]", entry, experts, num_gpus)


SEARCH_CONFIG = {
    "num_gpus": _n("int", lo=1, null=True), "max_rate_per_s": _n("num", above=0, null=True),
    "max_multiplier": _n("num", above=0, null=True), "rate_unit": _n("str"), "found": _n("bool"),
    "first_failing_rate_per_s": _n("num", above=0, null=True), "feasible": _n("bool"),
    "gpu_price_per_hour": _n("num", above=0, null=True), "gpu_price_source": _n("str", null=True),
    "output_tokens_per_s_per_gpu": NONNEG_OR_NULL, "output_tokens_per_s_per_user": NONNEG_OR_NULL,
    "gpu_hours_per_m_output_tokens": NONNEG_OR_NULL, "gpu_hours_per_m_input_tokens": NONNEG_OR_NULL,
}


def check_search(doc, file):
    """A search document (moesim search --json): the keys the page reads."""
    c = Checker(file)
    c.value(doc, "(document)", "dict")
    configs = c.get(doc, "configs", "", "list", required=True)
    if not configs:
        c.fail("configs", "empty: a search has at least one configuration")
    c.get(doc, "scenario", "", "str")
    slo = c.get(doc, "slo", "", "dict") or {}
    c.get(slo, "min_attainment", "slo", "num", lo=0, hi=1)
    c.get(doc, "target_rate_per_s", "", "num", above=0, null=True)
    c.get(doc, "feasible_rule", "", "str", null=True)
    seen = set()
    for i, cf in enumerate(configs):
        p = f"configs[{i}]"
        c.value(cf, p, "dict")
        idx = c.get(cf, "config_idx", p, "int", required=True, lo=0)
        if idx in seen:
            c.fail(p + ".config_idx", f"configuration {idx} listed twice")
        seen.add(idx)
        for k, v in (c.get(cf, "parameters", p, "dict", null=True) or {}).items():
            if not (v is None or isinstance(v, (str, int, float))):
                c.fail(f"{p}.parameters.{k}", f"must be a string or a number, got {_describe(v)}")
            if isinstance(v, float):
                c.value(v, f"{p}.parameters.{k}", "num")
        c.get(cf, "error", p, "str", null=True)
        c.fields(cf, p, SEARCH_CONFIG)
        for j, probe in enumerate(c.get(cf, "probes", p, "list") or []):
            q = f"{p}.probes[{j}]"
            c.value(probe, q, "dict")
            c.get(probe, "rate_per_s", q, "num", required=True, above=0)
            c.get(probe, "attainment", q, "num", required=True, lo=0, hi=1, null=True)
    c.get(doc, "cheapest_config_idx", "", "int", null=True)
    return doc
