"""moesim from Python (docs/python.md).

Every function runs the command line's own subcommand in this process (the compiled
moesim._moesim calls the same C++ functions as the `moesim` executable, with an argv) and returns
what the command's --json prints as a dict, or its CSV as a pandas DataFrame. run() writes its
outputs as `moesim run --out DIR` does, into a temporary directory unless out_dir is given, and
reads the tables from those files, so the tables have the columns of requests.csv.
"""

import io
import json
import math
import os
import tempfile

import pandas as pd

from . import _moesim
from .errors import UsageError

__all__ = ["RunResult", "run", "model_show", "topo_show", "collective", "compare", "sweep",
           "search", "steps_table", "command"]


def _value_text(value):
    """An override's value as TOML text (strings quoted, so "2" stays a string)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    raise UsageError(f"override value {value!r}: not an int, float, bool or str",
                     reason=f"override value {value!r}: not an int, float, bool or str")


def _override_args(overrides):
    """--set arguments of overrides: a dict {key.path: value} or a list of "key.path=value"."""
    if overrides is None:
        return []
    if isinstance(overrides, dict):
        items = [f"{k}={_value_text(v)}" for k, v in overrides.items()]
    elif isinstance(overrides, str):
        items = [overrides]
    else:
        items = list(overrides)
    argv = []
    for item in items:
        argv += ["--set", str(item)]
    return argv


def _option_args(**options):
    """--name value for each option that is not None (underscores become dashes); True is a
    flag, False leaves it out."""
    argv = []
    for name, value in options.items():
        if value is None or value is False:
            continue
        flag = "--" + name.replace("_", "-")
        if value is True:
            argv.append(flag)
        else:
            argv += [flag, str(value)]
    return argv


def _call(command, argv):
    code, out = _moesim.call(command, [str(a) for a in argv])
    return code, out.decode()


def _json(command, argv):
    code, out = _call(command, argv + ["--json"])
    if not out.strip():
        raise RuntimeError(f"moesim {command} printed nothing (exit code {code})")
    return json.loads(out)


class RunResult:
    """One simulated run.

    summary: dict, what `moesim run --json` prints (summary.json's keys plus wall_s).
    requests: DataFrame of requests.csv (one row per arrived request), or None when the
        scenario turns requests_csv off.
    steps: DataFrame of the executed steps (steps_table() of the --record step trace), or None
        (fast tier, or steps=False).
    step_series: DataFrame of steps.csv (every executed step of every replica, either tier:
        batch, KV blocks, GPU times; docs/outputs.md), or None when the scenario turns
        steps_csv off.
    exit_code: the command line's exit code (0, or 1 when conservation broke).
    out_dir: the output directory when run(out_dir=...) kept it, else None.
    """

    def __init__(self, summary, requests, steps, exit_code, out_dir, step_series=None):
        self.summary = summary
        self.requests = requests
        self.steps = steps
        self.step_series = step_series
        self.exit_code = exit_code
        self.out_dir = out_dir

    @property
    def event_digest(self):
        return self.summary["event_digest"]

    @property
    def conservation_ok(self):
        return self.summary["conservation_ok"]

    def __repr__(self):
        n = 0 if self.requests is None else len(self.requests)
        return (f"RunResult(scenario={self.summary.get('scenario')!r}, "
                f"event_digest={self.event_digest!r}, requests={n})")


def steps_table(step_trace_path):
    """One row per step record of a step trace (docs/schemas/step_trace.md): step, replica,
    start_ns, end_ns, step_ns, num_sequences, num_prefill, num_decode, new_tokens,
    context_tokens (sums over the batch), num_moe_layers, dispatch_bytes and combine_bytes (sums
    over the MoE layers)."""
    rows = []
    with open(step_trace_path) as f:
        for line in f:
            rec = json.loads(line)
            if rec.get("record") != "step":
                continue
            seqs = rec.get("sequences", [])
            layers = rec.get("layers", [])
            rows.append({
                "step": rec["step"],
                "replica": rec["replica"],
                "start_ns": rec["start_ns"],
                "end_ns": rec["end_ns"],
                "step_ns": rec.get("sim", {}).get("step_ns", rec["end_ns"] - rec["start_ns"]),
                "num_sequences": len(seqs),
                "num_prefill": sum(1 for s in seqs if s["phase"] == "prefill"),
                "num_decode": sum(1 for s in seqs if s["phase"] == "decode"),
                "new_tokens": sum(s["new_tokens"] for s in seqs),
                "context_tokens": sum(s["context_tokens"] for s in seqs),
                "num_moe_layers": len(layers),
                "dispatch_bytes": sum(l.get("dispatch_bytes", 0) for l in layers),
                "combine_bytes": sum(l.get("combine_bytes", 0) for l in layers),
            })
    columns = ["step", "replica", "start_ns", "end_ns", "step_ns", "num_sequences", "num_prefill",
               "num_decode", "new_tokens", "context_tokens", "num_moe_layers", "dispatch_bytes",
               "combine_bytes"]
    return pd.DataFrame(rows, columns=columns)


def _run_once(scenario, argv, base_dir):
    if isinstance(scenario, dict):
        base = os.path.abspath(base_dir if base_dir is not None else os.getcwd())
        return _moesim.run(argv, scenario, os.path.join(base, "<scenario dict>"), base)
    if base_dir is not None:
        raise UsageError("base_dir is only for a scenario dict (a file's paths are relative to "
                         "the file)", reason="base_dir is only for a scenario dict")
    return _moesim.run([os.fspath(scenario)] + argv, None)


def run(scenario, overrides=None, *, tier=None, seed=None, duration_s=None, steps=True,
        record_steps=None, trace_window=None, tier_check=None, out_dir=None, base_dir=None):
    """Simulates a scenario, as `moesim run SCENARIO --json --out DIR` does.

    scenario: a scenario file path, or a dict with the schema of a scenario TOML file
        (docs/scenarios.md); a dict's relative paths (model, topology, traces) resolve against
        base_dir (default: the current directory).
    overrides: {key.path: value} or ["key.path=value", ...], applied as `moesim run --set`.
    tier: "exact" or "fast"; seed: root seed; duration_s: simulated seconds (defaults: the
        scenario's [run] table).
    steps: also record the executed steps (exact tier) and return them as a DataFrame;
        record_steps caps how many (default: the scenario's [outputs] record_max_steps).
    trace_window: (start_s, end_s) of the Chrome trace; tier_check: as --tier-check N.
    out_dir: keep the outputs (summary.json, requests.csv, trace.json, resolved/, steps.jsonl)
        in this directory instead of a temporary one.
    Raises ConfigError (file, key_path, reason) on bad input.
    """
    window = None if trace_window is None else f"{trace_window[0]}:{trace_window[1]}"
    options = _option_args(seed=seed, duration=duration_s, tier=tier, tier_check=tier_check,
                           trace_window=window, record_steps=record_steps)
    with tempfile.TemporaryDirectory(prefix="moesim-run-") as tmp:
        out = os.path.abspath(out_dir) if out_dir is not None else os.path.join(tmp, "out")
        record = os.path.join(out if out_dir is not None else tmp, "steps.jsonl")
        base_argv = _override_args(overrides) + options + ["--json", "--out", out]
        want_steps = steps and tier != "fast"
        try:
            code, text = _run_once(scenario, base_argv + (["--record", record] if want_steps
                                                          else []), base_dir)
        except UsageError as e:
            # A scenario whose own run.tier is "fast" records no steps: run it without.
            if not want_steps or "--record needs the exact tier" not in e.reason:
                raise
            want_steps = False
            code, text = _run_once(scenario, base_argv, base_dir)
        summary = json.loads(text.decode())
        requests_csv = os.path.join(out, "requests.csv")
        requests = pd.read_csv(requests_csv) if os.path.exists(requests_csv) else None
        step_df = steps_table(record) if want_steps and os.path.exists(record) else None
        steps_csv = os.path.join(out, "steps.csv")
        series = pd.read_csv(steps_csv) if os.path.exists(steps_csv) else None
        return RunResult(summary, requests, step_df, code, out_dir, series)


def model_show(card, context=None):
    """`moesim model show CARD --json` as a dict (a TOML card or a HuggingFace config.json)."""
    return _json("model", ["show", os.fspath(card)] + _option_args(context=context))


def topo_show(topology):
    """`moesim topo show FILE --json` as a dict."""
    return _json("topo", ["show", os.fspath(topology)])


def collective(topology, *, ep, tokens_per_gpu, hidden, top_k, experts=None, dispatch_dtype=None,
               combine_dtype=None, skew=None, algorithm=None, model=None, seed=None,
               profile=None, expert_groups=None, topk_groups=None):
    """`moesim collective --json` as a dict: one MoE dispatch + combine over GPUs 0..ep-1."""
    return _json("collective", _option_args(
        topology=os.fspath(topology), ep=ep, tokens_per_gpu=tokens_per_gpu, hidden=hidden,
        top_k=top_k, experts=experts, dispatch_dtype=dispatch_dtype, combine_dtype=combine_dtype,
        skew=skew, algorithm=algorithm, model=model, seed=seed, profile=profile,
        expert_groups=expert_groups, topk_groups=topk_groups))


def compare(a, b, *, seed=None, replications=None, resamples=None, confidence=None,
            duration_s=None, threads=None, set_a=None, set_b=None, drop_a=None, drop_b=None):
    """`moesim compare A B --json` as a dict (paired differences B - A with intervals).
    set_a / set_b: overrides of A or B (a dict {key.path: value} or a list of "key.path=value",
    as run's overrides); drop_a / drop_b: key paths (a str or a list) removed from A or B first,
    e.g. compare(s, s, drop_a="policies") compares a policy against the same scenario without it."""
    def sets(flag, overrides):
        args = _override_args(overrides)
        return [flag if a == "--set" else a for a in args]

    def drops(flag, paths):
        if paths is None:
            return []
        paths = [paths] if isinstance(paths, str) else list(paths)
        return [x for p in paths for x in (flag, str(p))]

    return _json("compare", [os.fspath(a), os.fspath(b)] + _option_args(
        seed=seed, replications=replications, resamples=resamples, confidence=confidence,
        duration=duration_s, threads=threads) + sets("--set-a", set_a) + sets("--set-b", set_b)
        + drops("--drop-a", drop_a) + drops("--drop-b", drop_b))


def sweep(sweep_file, *, threads=None, shard=None, out=None, slo=None, min_attainment=None,
          gpu_price_per_hour=None, plan=None):
    """`moesim sweep SWEEP.toml` as a DataFrame: the sweep CSV (docs/sweeps.md), one row per run
    in grid order. out: also keep the CSV in this file (`--out FILE.csv`, written as the command
    line writes it). slo ("ttft_p99_ms=2000" or a dict), min_attainment and gpu_price_per_hour
    set the planner columns (feasible, cost); plan: write the planner's table (`--plan`, a .csv or
    .json file)."""
    if isinstance(slo, dict):
        slo = ",".join(f"{k}={v}" for k, v in slo.items())
    argv = [os.fspath(sweep_file)] + _option_args(
        threads=threads, shard=shard, slo=slo, min_attainment=min_attainment,
        gpu_price_per_hour=gpu_price_per_hour, plan=None if plan is None else os.fspath(plan))
    if out is not None:
        _call("sweep", argv + ["--out", os.fspath(out)])
        return pd.read_csv(out)
    code, text = _call("sweep", argv)
    return pd.read_csv(io.StringIO(text))


def command(name, *args):
    """Any other subcommand in process (e.g. "layers", "prune"): `moesim NAME ARGS...`'s stdout,
    parsed as JSON when ARGS hold "--json". Raises ConfigError / UsageError as the functions
    above do; returns the text otherwise."""
    argv = [os.fspath(a) if isinstance(a, os.PathLike) else str(a) for a in args]
    code, text = _call(name, argv)
    return json.loads(text) if "--json" in argv else text


def search(scenario, slo, *, grid=None, target_rate=None, min_attainment=None, seed=None,
           tolerance=None, max_doublings=None, threads=None, gpu_price_per_hour=None, plan=None,
           probe_infeasible=False):
    """`moesim search SCENARIO --slo LIMITS --json` as a dict, plus "table": a DataFrame with one
    row per configuration (config_idx, its parameters, and the scalar fields of "configs"; the
    probes and the diagnosis stay in "configs"). gpu_price_per_hour, plan (`--plan FILE`) and
    probe_infeasible are the command's planner options (docs/sweeps.md).

    slo: "ttft_p99_ms=2000,tpot_p99_ms=100" or a dict {name: limit}.
    """
    if isinstance(slo, dict):
        slo = ",".join(f"{k}={v}" for k, v in slo.items())
    result = _json("search", [os.fspath(scenario)] + _option_args(
        slo=slo, grid=None if grid is None else os.fspath(grid), target_rate=target_rate,
        min_attainment=min_attainment, seed=seed, tolerance=tolerance,
        max_doublings=max_doublings, threads=threads, gpu_price_per_hour=gpu_price_per_hour,
        plan=None if plan is None else os.fspath(plan), probe_infeasible=probe_infeasible))
    rows = []
    for c in result["configs"]:
        row = {"config_idx": c["config_idx"]}
        row.update(c.get("parameters", {}))
        row.update({k: v for k, v in c.items()
                    if k not in ("config_idx", "parameters", "probes", "diagnosis")})
        rows.append(row)
    result["table"] = pd.DataFrame(rows)
    return result
