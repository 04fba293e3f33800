"""The CSV files the report reads, checked column by column against what moesim writes:
requests.csv and steps.csv (docs/outputs.md, docs/report.md) and the sweep CSV (docs/sweeps.md).

moesim writes a missing figure as an empty cell and never writes nan, inf or a number beyond
double's range, so the tables are read with only the empty cell as missing (pandas would also
take "nan", "NA", "null", ... as missing) and every column the page uses is checked for its
type and range: a cell that is not a number, not finite, negative where the column cannot be,
outside [0, 1] for a fraction, or empty where moesim always writes a value is bad input naming
the file, the row (counted from 1 after the header) and the column. The checks are vectorised:
a million-row requests.csv costs about a second more than reading it.
"""

import numpy as np
import pandas as pd

from .bad_input import at_cell, in_file, quote

INT64_MAX = 2**63 - 1


class Col:
    """A column: kind "int", "num", "str", "bool" or "enum"; lo / hi bounds (inclusive), above
    (exclusive lower bound); empty: whether an empty cell is allowed; choices of an enum."""

    def __init__(self, kind, lo=None, hi=None, above=None, empty=False, choices=None):
        self.kind, self.lo, self.hi, self.above = kind, lo, hi, above
        self.empty, self.choices = empty, choices


def _int(lo=0, **kw):
    return Col("int", lo=lo, **kw)


def _num(lo=0, **kw):
    return Col("num", lo=lo, **kw)


MS = _num(empty=True)  # a latency in ms: >= 0, empty when not reached
NS = _int(lo=-1)  # a time in ns: -1 when not reached
FRACTION = _num(hi=1, empty=True)

REQUESTS = {
    "request_id": _int(), "session_id": _int(lo=-1), "turn_idx": _int(), "attempt_idx": _int(),
    "replica": _int(lo=-1), "domain": Col("str", empty=True),
    "outcome": Col("enum", choices=("completed", "rejected", "in_flight")),
    "reject_reason": Col("str", empty=True), "arrival_ns": _int(), "first_scheduled_ns": NS,
    "first_token_ns": NS, "done_ns": NS, "prompt_tokens": _int(), "output_tokens": _int(),
    "generated_tokens": _int(), "cached_prompt_tokens": _int(), "preemptions": _int(),
    "queueing_ms": MS, "ttft_ms": MS, "tpot_ms": MS, "e2e_ms": MS,
    "loaded_prompt_tokens": _int(), "kv_load_ms": MS, "prefill_ms": MS,
}
# The columns the page reads (the others are checked when present).
REQUESTS_REQUIRED = ("outcome", "arrival_ns", "done_ns", "generated_tokens", "ttft_ms", "tpot_ms",
                     "e2e_ms")

STEPS = {
    "replica": _int(), "step": _int(), "start_ns": _int(), "duration_ns": _int(),
    "num_seqs": _int(), "prefill_tokens": _int(), "decode_tokens": _int(),
    "kv_owned_blocks": _int(), "kv_cached_blocks": _int(), "kv_blocks": _int(),
    "kv_used_fraction_max": _num(hi=1), "compute_ns_mean": _num(), "comm_ns_mean": _num(),
    "wait_ns_mean": _num(), "wait_ns_max": _int(),
}
STEPS_REQUIRED = tuple(STEPS)

_E = dict(empty=True)
SWEEP = {
    "run_idx": _int(), "num_runs": _int(lo=1), "config_idx": _int(), "seed": _int(**_E),
    "status": Col("enum", choices=("ok", "error", "conservation_broken")),
    "num_gpus": _int(lo=1, **_E),
    **{k: _int(**_E) for k in ("num_arrived", "num_completed", "num_rejected", "num_in_flight",
                               "num_waiting_first_token", "num_slo_met", "num_slo_decided",
                               "num_preemptions", "num_steps")},
    "converged": Col("enum", choices=("yes", "no"), empty=True),
    **{k: _num(**_E) for k in (
        "warmup_s", "simulated_s", "max_duration_factor", "max_wait_first_token_ms",
        "ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p90_ms", "tpot_p99_ms",
        "e2e_p50_ms", "e2e_p99_ms", "queueing_p50_ms", "queueing_p99_ms", "input_tokens_per_s",
        "output_tokens_per_s", "requests_per_s", "goodput_req_per_s",
        "input_tokens_per_s_per_gpu", "output_tokens_per_s_per_gpu",
        "output_tokens_per_s_per_user", "gpu_hours_per_m_input_tokens",
        "gpu_hours_per_m_output_tokens", "usd_per_m_input_tokens", "usd_per_m_output_tokens",
        "compute_fraction", "comm_fraction", "wait_fraction", "expert_imbalance",
        "expert_gpu_imbalance_mean", "expert_slot_imbalance_mean")},
    **{k: FRACTION for k in ("slo_attainment", "prefix_cache_hit_rate", "kv_high_water_fraction",
                             "expert_gpu_balancedness", "expert_slot_balancedness")},
    "gpu_price_per_hour": Col("num", above=0, empty=True),
    "feasible": Col("bool", empty=True),
    **{k: Col("str", empty=True) for k in ("gpu_price_source", "feasible_limits", "error",
                                           "lower_bounds", "infeasible_reason", "actions",
                                           "policy_metrics", "digest")},
}
SWEEP_REQUIRED = ("run_idx", "num_runs", "config_idx", "seed", "status", "num_gpus",
                  "slo_attainment", "ttft_p99_ms", "tpot_p99_ms", "input_tokens_per_s",
                  "output_tokens_per_s", "error")


def read_csv(path):
    """The CSV with only empty cells missing; BadInput when it does not parse."""
    try:
        return pd.read_csv(path, keep_default_na=False, na_values=[""])
    except (OSError, ValueError, pd.errors.ParserError) as e:
        raise in_file(path, f"cannot read as CSV: {' '.join(str(e).split())}") from None


def _first(mask):
    """The position of the first True of a boolean array, or None."""
    idx = np.flatnonzero(np.asarray(mask, dtype=bool))
    return int(idx[0]) if idx.size else None


def _cell_text(v):
    """A cell's value for a message (pandas read a number column as floats: -1, not -1.0)."""
    if pd.isna(v):
        return "an empty cell"
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e16:
        return str(int(v))
    return quote(v)


def _numbers(path, name, col, s):
    """Column s checked (numbers, finite, in range, integers for "int"): s itself when pandas
    read it as it should be, else converted (float64 with NaN for empty cells; int64)."""
    raw = s
    if s.dtype == object or s.dtype == bool:
        num = pd.to_numeric(s.astype(str).where(s.notna()), errors="coerce")
        bad = _first(s.notna().to_numpy() & num.isna().to_numpy())
        if bad is not None:
            raise at_cell(path, bad + 1, name, f"not a number: {_cell_text(raw.iloc[bad])}")
        s = num
    ints = s.dtype.kind in "iu"
    v = s.to_numpy() if ints else s.to_numpy(dtype=float, na_value=np.nan)

    def fail_at(mask, reason):
        bad = _first(mask)
        if bad is not None:
            raise at_cell(path, bad + 1, name, reason(_cell_text(raw.iloc[bad])))

    if not ints:
        fail_at(np.isinf(v), lambda t: f"{t} is not a finite number")
        if not col.empty:
            fail_at(np.isnan(v), lambda t: "empty: moesim always writes a value here")
    with np.errstate(invalid="ignore"):
        if col.lo is not None:
            fail_at(v < col.lo, lambda t: f"must be >= {col.lo}, got {t}")
        if col.hi is not None:
            fail_at(v > col.hi, lambda t: f"must be <= {col.hi}, got {t}")
        if col.above is not None:
            fail_at(v <= col.above, lambda t: f"must be > {col.above}, got {t}")
    if col.kind != "int":
        return s if s is raw or s.dtype == float else pd.Series(v, index=s.index)
    if ints:
        if s.dtype.kind == "u":  # beyond int64: pandas read it as uint64
            fail_at(v > INT64_MAX, lambda t: f"not a 64-bit integer: {t}")
            return s.astype("int64")
        return s
    with np.errstate(invalid="ignore"):
        fail_at((v != np.round(v)) & ~np.isnan(v), lambda t: f"not an integer: {t}")
        fail_at(np.abs(v) >= 2.0**63, lambda t: f"not a 64-bit integer: {t}")
    if not np.isnan(v).any():
        return pd.Series(v, index=s.index).astype("int64")
    return pd.Series(v, index=s.index)


def _check_column(path, name, col, s):
    if col.kind in ("int", "num"):
        return _numbers(path, name, col, s)
    if not col.empty:
        bad = _first(s.isna())
        if bad is not None:
            raise at_cell(path, bad + 1, name, "empty: moesim always writes a value here")
    if col.kind == "enum":
        bad = _first(s.notna() & ~s.astype(str).isin(col.choices))
        if bad is not None:
            raise at_cell(path, bad + 1, name, f"must be one of {', '.join(col.choices)}, got "
                          f"{_cell_text(s.iloc[bad])}")
    elif col.kind == "bool":
        text = s.map(lambda x: x if pd.isna(x) else str(x).lower())
        bad = _first(s.notna() & ~text.isin(("true", "false")))
        if bad is not None:
            raise at_cell(path, bad + 1, name, f"must be true or false, got "
                          f"{_cell_text(s.iloc[bad])}")
        if s.dtype != bool:
            s = text.map(lambda x: x if pd.isna(x) else x == "true")
    elif s.dtype != object:  # a text column pandas read as numbers
        s = s.map(lambda x: x if pd.isna(x) else str(x))
    return s


def check_table(df, path, columns, required):
    """df with the columns of `columns` that it has checked and converted (int64 where no cell is
    empty, float64 with NaN for empty cells, str, bool); BadInput naming the first bad cell or a
    missing column of `required`."""
    names = [str(c) for c in df.columns]
    for name in names:
        base, dot, suffix = name.rpartition(".")
        if dot and suffix.isdigit() and base in names and base in columns:
            raise in_file(path, f"column {base} appears twice in the header")
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise in_file(path, f"no column {', '.join(missing)} in the header (moesim writes "
                      f"{'it' if len(missing) == 1 else 'them'})")
    for name, col in columns.items():
        if name in df.columns:
            s = df[name]
            checked = _check_column(path, name, col, s)
            if checked is not s:
                df[name] = checked
    return df


def read_requests(path):
    df = check_table(read_csv(path), path, REQUESTS, REQUESTS_REQUIRED)
    late = _first((df["done_ns"] >= 0) & (df["done_ns"] < df["arrival_ns"]))
    if late is not None:
        raise at_cell(path, late + 1, "done_ns", f"{df['done_ns'].iloc[late]} is before the "
                      f"request's arrival_ns {df['arrival_ns'].iloc[late]}")
    return df


def read_steps(path):
    df = check_table(read_csv(path), path, STEPS, STEPS_REQUIRED)
    over = _first(df["kv_owned_blocks"] + df["kv_cached_blocks"] > df["kv_blocks"])
    if over is not None:
        raise at_cell(path, over + 1, "kv_owned_blocks",
                      f"owned {df['kv_owned_blocks'].iloc[over]} + cached "
                      f"{df['kv_cached_blocks'].iloc[over]} blocks exceed the pool's kv_blocks "
                      f"{df['kv_blocks'].iloc[over]}")
    return df


def check_sweep_rows(df, path):
    """The sweep table's rows against each other (after check_table)."""
    past = _first(df["run_idx"] >= df["num_runs"])
    if past is not None:
        raise at_cell(path, past + 1, "run_idx", f"{df['run_idx'].iloc[past]} is not below "
                      f"num_runs {df['num_runs'].iloc[past]}")
    no_gpus = _first((df["status"] == "ok") & df["num_gpus"].isna())
    if no_gpus is not None:
        raise at_cell(path, no_gpus + 1, "num_gpus", "empty in a row with status ok")
