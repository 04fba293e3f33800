"""moesim from Python (docs/python.md).

Every function calls the simulator's typed API (sim/api.h) in this process through the compiled
moesim._moesim: the same request checks, results and writers as the `moesim` command line, so a
function returns what the command's --json prints, as a dict, or its CSV as a pandas DataFrame.
run() writes its outputs as `moesim run --out DIR` does, into a temporary directory unless
out_dir is given, and reads the tables from those files, so the tables have the columns of
requests.csv. Arguments are checked here first (checks.py: types, 64-bit integers, finite
numbers), so that a bad one is a UsageError naming it, never a TypeError of the binding.
"""

import io
import json
import os
import sys
import tempfile

import pandas as pd

from . import _moesim
from . import checks as ck
from .errors import UsageError

__all__ = ["RunResult", "run", "model_show", "topo_show", "collective", "compare", "sweep",
           "sweep_merge", "sweep_plan", "search", "layers", "prune", "calibrate", "validate",
           "derive_profile", "trace_fit", "steps_table"]


def _value_text(value, name):
    """An override's value as TOML text (strings quoted, so "2" stays a string); integers must
    fit 64 bits and floats be finite, as a scenario file's values."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(ck.integer(name, value))
    if isinstance(value, float):
        return repr(ck.number(name, value))
    if isinstance(value, str):
        return json.dumps(ck.text(name, value))
    raise ck.usage(name, f"override value {value!r}: not an int, float, bool or str")


def _overrides(overrides, name="overrides"):
    """"key.path=value" texts of overrides: a dict {key.path: value} or a list of them."""
    if overrides is None:
        return []
    if isinstance(overrides, dict):
        out = []
        for k, v in overrides.items():
            key = ck.text(f"{name} key", k)
            out.append(f"{key}={_value_text(v, f'{name}[{key!r}]')}")
        return out
    return ck.strings(name, overrides)


def _path(p, name="path", required=False):
    return ck.path(name, p, required)


def _slo_text(slo):
    if isinstance(slo, dict):
        parts = []
        for k, v in slo.items():
            key = ck.text("slo key", k)
            parts.append(f"{key}={ck.number(f'slo[{key!r}]', v)!r}")
        return ",".join(parts)
    return ck.text("slo", slo)


class RunResult:
    """One simulated run.

    summary: dict, what `moesim run --json` prints (summary.json's keys plus wall_s; with
        diagnose=True also "diagnosis").
    requests: DataFrame of requests.csv (one row per arrived request), or None when the
        scenario turns requests_csv off.
    steps: DataFrame of the executed steps (steps_table() of the --record step trace), or None
        (fast fidelity, or steps=False).
    step_series: DataFrame of steps.csv (every executed step of every replica, either fidelity:
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
    path = _path(step_trace_path, "step_trace_path", required=True)
    rows = []
    for lineno, rec in _jsonl_records(path):
        if rec.get("record") != "step":
            continue
        try:
            rows.append(_step_row(rec))
        except (KeyError, TypeError, AttributeError) as e:
            raise ck.bad_file(path, f"not a step record of docs/schemas/step_trace.md "
                              f"({type(e).__name__}: {e})", line=lineno) from None
    columns = ["step", "replica", "start_ns", "end_ns", "step_ns", "num_sequences", "num_prefill",
               "num_decode", "new_tokens", "context_tokens", "num_moe_layers", "dispatch_bytes",
               "combine_bytes"]
    return pd.DataFrame(rows, columns=columns)


def _jsonl_records(path):
    """(line number, record) of a JSONL file; ConfigError naming the file and line for a file
    that cannot be read or a line that is not a JSON object."""
    try:
        with open(path, encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as e:
                    raise ck.bad_file(path, f"not JSON: {e.msg} (column {e.colno})",
                                      line=lineno) from None
                except (ValueError, RecursionError) as e:
                    raise ck.bad_file(path, f"not JSON: {type(e).__name__}", line=lineno) from None
                if not isinstance(rec, dict):
                    raise ck.bad_file(path, "a record is a JSON object", line=lineno)
                yield lineno, rec
    except OSError as e:
        raise ck.bad_file(path, f"cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise ck.bad_file(path, "not UTF-8 text") from None


def _step_row(rec):
    seqs = rec.get("sequences", [])
    layers = rec.get("layers", [])
    return {
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
    }


def _run_once(scenario, overrides, base_dir, **request):
    if isinstance(scenario, dict):
        base = os.path.abspath(base_dir if base_dir is not None else os.getcwd())
        return _moesim.run(scenario, overrides, name=os.path.join(base, "<scenario dict>"),
                           base_dir=base, **request)
    if base_dir is not None:
        raise UsageError("base_dir is only for a scenario dict (a file's paths are relative to "
                         "the file)", reason="base_dir is only for a scenario dict")
    return _moesim.run(_path(scenario, "scenario", required=True), overrides, **request)


def run(scenario, overrides=None, *, fidelity=None, seed=None, duration_s=None, steps=True,
        record_steps=None, trace_window=None, fidelity_check=None, out_dir=None, base_dir=None,
        diagnose=False):
    """Simulates a scenario, as `moesim run SCENARIO --json --out DIR` does.

    scenario: a scenario file path, or a dict with the schema of a scenario TOML file
        (docs/scenarios.md); a dict's relative paths (model, topology, traces) resolve against
        base_dir (default: the current directory).
    overrides: {key.path: value} or ["key.path=value", ...], applied as `moesim run --set`.
    fidelity: "exact" or "fast"; seed: root seed; duration_s: simulated seconds (defaults: the
        scenario's [run] table).
    steps: also record the executed steps (exact fidelity) and return them as a DataFrame;
        record_steps caps how many (default: the scenario's [outputs] record_max_steps).
    trace_window: (start_s, end_s) of the Chrome trace; fidelity_check: as --fidelity-check N;
    diagnose: as --diagnose (the summary's "diagnosis").
    out_dir: keep the outputs (summary.json, requests.csv, trace.json, resolved/, steps.jsonl)
        in this directory instead of a temporary one.
    Raises ConfigError (file, key_path, reason) on bad input.
    """
    texts = _overrides(overrides)
    if not isinstance(scenario, dict):
        _path(scenario, "scenario", required=True)
    window = ck.window("trace_window", trace_window)
    steps = ck.flag("steps", steps)
    out_path = _path(out_dir, "out_dir")
    base_dir = _path(base_dir, "base_dir")
    with tempfile.TemporaryDirectory(prefix="moesim-run-") as tmp:
        out = os.path.abspath(out_path) if out_path is not None else os.path.join(tmp, "out")
        record = os.path.join(out if out_path is not None else tmp, "steps.jsonl")
        request = dict(seed=ck.integer("seed", seed), duration_s=ck.number("duration_s", duration_s),
                       fidelity=ck.text("fidelity", fidelity),
                       fidelity_check=ck.integer("fidelity_check", fidelity_check),
                       trace_window=window, record_steps=ck.integer("record_steps", record_steps),
                       out_dir=out, diagnose=ck.flag("diagnose", diagnose))
        want_steps = steps and fidelity != "fast"
        try:
            code, summary = _run_once(scenario, texts, base_dir,
                                      record_path=record if want_steps else None, **request)
        except UsageError as e:
            # A scenario whose own run.fidelity is "fast" records no steps: run it without.
            if not want_steps or "--record needs the exact fidelity" not in e.reason:
                raise
            want_steps = False
            code, summary = _run_once(scenario, texts, base_dir, **request)
        requests_csv = os.path.join(out, "requests.csv")
        requests = pd.read_csv(requests_csv) if os.path.exists(requests_csv) else None
        step_df = steps_table(record) if want_steps and os.path.exists(record) else None
        steps_csv = os.path.join(out, "steps.csv")
        series = pd.read_csv(steps_csv) if os.path.exists(steps_csv) else None
        return RunResult(summary, requests, step_df, code, out_dir, series)


def model_show(card, context=None):
    """`moesim model show CARD --json` as a dict (a TOML card or a HuggingFace config.json)."""
    return _moesim.model_show(_path(card, "card", required=True),
                              context=ck.integer("context", context))


def topo_show(topology):
    """`moesim topo show FILE --json` as a dict."""
    return _moesim.topo_show(_path(topology, "topology", required=True))


def collective(topology, *, ep, tokens_per_gpu, hidden, top_k, experts=None, dispatch_dtype=None,
               combine_dtype=None, skew=None, algorithm=None, network_model=None, seed=None,
               profile=None, expert_groups=None, topk_groups=None, ll_transport=None, model=None):
    """`moesim collective --json` as a dict: one MoE dispatch + combine over GPUs 0..ep-1.
    network_model is the network model (`--network-model`; `model` is its former name)."""
    if model is not None and network_model is not None:
        raise UsageError("give network_model only (model is its former name)",
                         reason="give network_model only (model is its former name)")
    i, t = ck.integer, ck.text
    return _moesim.collective(
        _path(topology, "topology", required=True), ep=i("ep", ep),
        tokens_per_gpu=i("tokens_per_gpu", tokens_per_gpu), hidden=i("hidden", hidden),
        top_k=i("top_k", top_k), experts=i("experts", experts),
        expert_groups=i("expert_groups", expert_groups), topk_groups=i("topk_groups", topk_groups),
        dispatch_dtype=t("dispatch_dtype", dispatch_dtype),
        combine_dtype=t("combine_dtype", combine_dtype), skew=t("skew", skew),
        algorithm=t("algorithm", algorithm), ll_transport=t("ll_transport", ll_transport),
        network_model=t("network_model", network_model if network_model is not None else model),
        seed=i("seed", seed), profile=_path(profile, "profile"))


def compare(a, b, *, seed=None, replications=None, resamples=None, confidence=None,
            duration_s=None, threads=None, set_a=None, set_b=None, drop_a=None, drop_b=None):
    """`moesim compare A B --json` as a dict (paired differences B - A with intervals).
    set_a / set_b: overrides of A or B (a dict {key.path: value} or a list of "key.path=value",
    as run's overrides); drop_a / drop_b: key paths (a str or a list) removed from A or B first,
    e.g. compare(s, s, drop_a="policies") compares a policy against the same scenario without it."""
    return _moesim.compare(_path(a, "a", required=True), _path(b, "b", required=True),
                           set_a=_overrides(set_a, "set_a"), set_b=_overrides(set_b, "set_b"),
                           drop_a=ck.strings("drop_a", drop_a), drop_b=ck.strings("drop_b", drop_b),
                           seed=ck.integer("seed", seed),
                           replications=ck.integer("replications", replications),
                           resamples=ck.integer("resamples", resamples),
                           confidence=ck.number("confidence", confidence),
                           duration_s=ck.number("duration_s", duration_s),
                           threads=ck.integer("threads", threads))


def sweep(sweep_file, *, threads=None, shard=None, out=None, slo=None, min_attainment=None,
          gpu_price_per_hour=None, plan=None, resume=False, max_duration_factor=None):
    """`moesim sweep SWEEP.toml` as a DataFrame: the sweep CSV (docs/sweeps.md), one row per run
    in grid order. out: also keep the CSV in this file (`--out FILE.csv`, written as the command
    line writes it; resume goes on from its .partial journal). slo ("ttft_p99_ms=2000" or a
    dict), min_attainment and gpu_price_per_hour set the planner columns (feasible, cost); plan:
    write the planner's table (`--plan`, a .csv or .json file); max_duration_factor (default 5:
    how far a run that has not converged runs on). The summary the command prints at the end
    goes to stderr."""
    n = ck.number
    code, csv, summary = _moesim.sweep(
        _path(sweep_file, "sweep_file", required=True), out=_path(out, "out"),
        resume=ck.flag("resume", resume), threads=ck.integer("threads", threads),
        shard=ck.text("shard", shard), slo=None if slo is None else _slo_text(slo),
        min_attainment=n("min_attainment", min_attainment),
        gpu_price_per_hour=n("gpu_price_per_hour", gpu_price_per_hour), plan=_path(plan, "plan"),
        max_duration_factor=n("max_duration_factor", max_duration_factor))
    sys.stderr.write(summary)
    if out is not None:
        return pd.read_csv(out)
    return pd.read_csv(io.BytesIO(csv))


def sweep_merge(out, *shards):
    """`moesim sweep merge OUT.csv SHARD.csv...`: the shards' CSVs joined in grid order."""
    _moesim.sweep_merge([_path(s, f"shards[{k}]", required=True) for k, s in enumerate(shards)],
                        _path(out, "out", required=True))


def sweep_plan(csv, plan=None):
    """`moesim sweep plan SWEEP.csv [--plan FILE]`: the planner's summary of a finished sweep's
    CSV (text); plan also writes its table."""
    return _moesim.sweep_plan(_path(csv, "csv", required=True), _path(plan, "plan"))


def search(scenario, slo, *, grid=None, target_rate=None, min_attainment=None, seed=None,
           tolerance=None, max_doublings=None, replications=None, max_duration_factor=None,
           threads=None,
           gpu_price_per_hour=None, plan=None, probe_infeasible=False, full_probes=False,
           journal=None, resume=False):
    """`moesim search SCENARIO --slo LIMITS --json` as a dict, plus "table": a DataFrame with one
    row per configuration (config_idx, its parameters, and the scalar fields of "configs"; the
    probes and the diagnosis stay in "configs"). replications (default 3: seeds per
    configuration, for the interval on its max rate), max_duration_factor (default 5: how far a
    probe that has not converged runs on), gpu_price_per_hour, plan (`--plan FILE`),
    probe_infeasible, full_probes, journal and resume are the command's options
    (docs/sweeps.md).

    slo: "ttft_p99_ms=2000,tpot_p99_ms=100" or a dict {name: limit}.
    """
    i, n = ck.integer, ck.number
    result = _moesim.search(
        _path(scenario, "scenario", required=True), slo=None if slo is None else _slo_text(slo),
        grid=_path(grid, "grid"), target_rate=n("target_rate", target_rate),
        min_attainment=n("min_attainment", min_attainment), seed=i("seed", seed),
        tolerance=n("tolerance", tolerance), max_doublings=i("max_doublings", max_doublings),
        replications=i("replications", replications),
        max_duration_factor=n("max_duration_factor", max_duration_factor),
        threads=i("threads", threads), journal=_path(journal, "journal"),
        resume=ck.flag("resume", resume),
        gpu_price_per_hour=n("gpu_price_per_hour", gpu_price_per_hour), plan=_path(plan, "plan"),
        probe_infeasible=ck.flag("probe_infeasible", probe_infeasible),
        full_probes=ck.flag("full_probes", full_probes))
    rows = []
    for c in result["configs"]:
        row = {"config_idx": c["config_idx"]}
        row.update(c.get("parameters", {}))
        row.update({k: v for k, v in c.items()
                    if k not in ("config_idx", "parameters", "probes", "diagnosis")})
        rows.append(row)
    result["table"] = pd.DataFrame(rows)
    return result


def layers(scenario, *, batches=None, context=None, seed=None, network_model=None, overlap=None,
           prefill=None, timeline=False):
    """`moesim layers SCENARIO --json`: a list of rows (one per batch size and routing), or
    {"rows": [...], "timeline": [...]} with timeline=True. batches: sequences per GPU (a list)."""
    return _moesim.layers(_path(scenario, "scenario", required=True),
                          batches=ck.integers("batches", batches),
                          context=ck.integer("context", context), seed=ck.integer("seed", seed),
                          network_model=ck.text("network_model", network_model),
                          overlap=ck.text("overlap", overlap),
                          prefill=ck.integer("prefill", prefill),
                          timeline=ck.flag("timeline", timeline))


def prune(scenario, *, fractions=None, batch_per_gpu=None, context=None, profile_steps=None,
          tokens_per_step=None, write_plan=None):
    """`moesim prune SCENARIO --json` as a dict; write_plan: the plan of the (single) fraction
    as a file for [policies.expert_pruning] plan_file."""
    return _moesim.prune(_path(scenario, "scenario", required=True),
                         fractions=ck.numbers_("fractions", fractions),
                         batch_per_gpu=ck.integer("batch_per_gpu", batch_per_gpu),
                         context=ck.integer("context", context),
                         profile_steps=ck.integer("profile_steps", profile_steps),
                         tokens_per_step=ck.integer("tokens_per_step", tokens_per_step),
                         write_plan=_path(write_plan, "write_plan"))


def calibrate(measurements, *, out, name=None, max_segments=None, min_samples=None,
              min_size_gap=None, max_spread=None, topology=None, nccl_tests=None,
              nccl_ranks=None):
    """`moesim calibrate MEAS.jsonl... --out PROFILE.toml --json` as a dict: fits a cost-model
    profile from engine measurements (a path or a list of them) and writes it to out
    (docs/calibration.md). nccl_tests: nccl-tests alltoall_perf outputs (a path or a list)."""
    return _moesim.calibrate(ck.paths("measurements", measurements, required=True),
                             out=_path(out, "out"), name=ck.text("name", name),
                             max_segments=ck.integer("max_segments", max_segments),
                             min_samples=ck.integer("min_samples", min_samples),
                             min_size_gap=ck.number("min_size_gap", min_size_gap),
                             max_spread=ck.number("max_spread", max_spread),
                             topology=_path(topology, "topology"),
                             nccl_tests=ck.paths("nccl_tests", nccl_tests),
                             nccl_ranks=ck.integer("nccl_ranks", nccl_ranks))


def validate(scenario, *, profile, measurements, trace=None, out_dir=None):
    """`moesim validate SCENARIO --profile P --measurements M --json` as a dict (report.json):
    simulated against measured time per op kind, phase, step and end to end."""
    return _moesim.validate(_path(scenario, "scenario", required=True),
                            profile=_path(profile, "profile"),
                            measurements=_path(measurements, "measurements"),
                            trace=_path(trace, "trace"), out_dir=_path(out_dir, "out_dir"))


def derive_profile(from_profile, *, source_topology, topology, out, name=None):
    """`moesim derive-profile FROM --source-topology S --topology T --out OUT`: writes the
    derived profile; returns {"name", "derivation", "out"}."""
    return _moesim.derive_profile(_path(from_profile, "from_profile", required=True),
                                  source_topology=_path(source_topology, "source_topology"),
                                  topology=_path(topology, "topology"), out=_path(out, "out"),
                                  name=ck.text("name", name))


def trace_fit(trace, *, kind=None, start_s=None, end_s=None, max_requests=None, seed=None):
    """`moesim trace-fit TRACE --json` as a dict: the workload model fitted to a window of a
    Mooncake (.jsonl) or Azure (.csv) trace and its goodness of fit (docs/workload.md)."""
    return _moesim.trace_fit(_path(trace, "trace", required=True), kind=ck.text("kind", kind),
                             start_s=ck.number("start_s", start_s),
                             end_s=ck.number("end_s", end_s),
                             max_requests=ck.integer("max_requests", max_requests),
                             seed=ck.integer("seed", seed))
