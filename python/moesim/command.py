"""moesim.command(name, *args): a subcommand's command-line arguments on the typed functions.

Kept for code written against the argv form (`command("layers", path, "--json")`); new code
calls moesim.layers, moesim.prune, ... directly. The arguments are read as the command line
reads them (the same option names, strict numbers) and passed to the typed API; with "--json"
the result is the command's JSON document, else its text.
"""

import os
import sys

from . import _moesim
from .errors import UsageError

# Per command: (positional names, {option: (keyword, kind)}, {flag: keyword}). Kinds: str, int,
# float, "ints" / "floats" (comma-separated lists), "list" (repeatable), "path".
_INT, _FLOAT, _STR = "int", "float", "str"
_COMMANDS = {
    "model": (["sub", "card"], {"--context": ("context", _INT)}, {}),
    "topo": (["sub", "topology"], {}, {}),
    "run": (["scenario"], {"--set": ("overrides", "list"), "--seed": ("seed", _INT),
                           "--duration": ("duration_s", _FLOAT), "--out": ("out_dir", _STR),
                           "-o": ("out_dir", _STR), "--record": ("record_path", _STR),
                           "--record-steps": ("record_steps", _INT),
                           "--trace-window": ("trace_window", "window"),
                           "--fidelity": ("fidelity", _STR), "--fidelity-check": ("fidelity_check", _INT)},
            {"--diagnose": "diagnose"}),
    "compare": (["a", "b"], {"--seed": ("seed", _INT), "--replications": ("replications", _INT),
                             "--resamples": ("resamples", _INT),
                             "--confidence": ("confidence", _FLOAT),
                             "--duration": ("duration_s", _FLOAT), "--threads": ("threads", _INT),
                             "--set-a": ("set_a", "list"), "--set-b": ("set_b", "list"),
                             "--drop-a": ("drop_a", "list"), "--drop-b": ("drop_b", "list")},
                {"--progress": None}),
    "layers": (["scenario"], {"--batches": ("batches", "ints"), "--context": ("context", _INT),
                              "--seed": ("seed", _INT), "--network-model": ("network_model", _STR),
                              "--overlap": ("overlap", _STR), "--prefill": ("prefill", _INT)},
               {"--timeline": "timeline"}),
    "prune": (["scenario"], {"--batch-per-gpu": ("batch_per_gpu", _INT),
                             "--context": ("context", _INT), "--fractions": ("fractions", "floats"),
                             "--profile-steps": ("profile_steps", _INT),
                             "--tokens-per-step": ("tokens_per_step", _INT),
                             "--write-plan": ("write_plan", _STR)},
              {"--progress": None}),
    "collective": ([], {"--topology": ("topology", _STR), "--ep": ("ep", _INT),
                        "--tokens-per-gpu": ("tokens_per_gpu", _INT), "--hidden": ("hidden", _INT),
                        "--top-k": ("top_k", _INT), "--experts": ("experts", _INT),
                        "--expert-groups": ("expert_groups", _INT),
                        "--topk-groups": ("topk_groups", _INT),
                        "--dispatch-dtype": ("dispatch_dtype", _STR),
                        "--combine-dtype": ("combine_dtype", _STR), "--skew": ("skew", _STR),
                        "--algorithm": ("algorithm", _STR),
                        "--ll-transport": ("ll_transport", _STR),
                        "--network-model": ("network_model", _STR), "--seed": ("seed", _INT),
                        "--profile": ("profile", _STR)}, {}),
    "search": (["scenario"], {"--slo": ("slo", _STR), "--grid": ("grid", _STR),
                              "--target-rate": ("target_rate", _FLOAT),
                              "--min-attainment": ("min_attainment", _FLOAT),
                              "--seed": ("seed", _INT), "--tolerance": ("tolerance", _FLOAT),
                              "--max-doublings": ("max_doublings", _INT),
                              "--threads": ("threads", _INT), "--journal": ("journal", _STR),
                              "--gpu-price-per-hour": ("gpu_price_per_hour", _FLOAT),
                              "--plan": ("plan", _STR)},
               {"--resume": "resume", "--probe-infeasible": "probe_infeasible",
                "--full-probes": "full_probes", "--progress": None}),
    "sweep": (["sweep_file"], {"--out": ("out", _STR), "-o": ("out", _STR),
                               "--threads": ("threads", _INT), "--shard": ("shard", _STR),
                               "--slo": ("slo", _STR),
                               "--min-attainment": ("min_attainment", _FLOAT),
                               "--gpu-price-per-hour": ("gpu_price_per_hour", _FLOAT),
                               "--plan": ("plan", _STR)},
              {"--resume": "resume", "--progress": None}),
}


def _usage(message):
    return UsageError(message, reason=message)


def _convert(option, kind, text):
    try:
        if kind == _INT:
            return int(text)
        if kind == _FLOAT:
            return float(text)
        if kind in ("ints", "floats"):
            items = text.split(",")
            return [int(x) if kind == "ints" else float(x) for x in items]
        if kind == "window":
            start, end = text.split(":")
            return (float(start), float(end))
    except ValueError:
        raise _usage(f"option {option}: not a number: {text}") from None
    return text


def _parse(name, args):
    positional_names, options, flags = _COMMANDS[name]
    positionals, keywords, json_out = [], {}, False
    i = 0
    while i < len(args):
        a = args[i]
        option, eq, value = a.partition("=")
        if a == "--json":
            json_out = True
        elif a in flags:
            if flags[a]:
                keywords[flags[a]] = True
        elif option in options:
            if not eq:
                i += 1
                if i >= len(args):
                    raise _usage(f"option {option} needs a value")
                value = args[i]
            keyword, kind = options[option]
            if kind == "list":
                keywords.setdefault(keyword, []).append(value)
            else:
                keywords[keyword] = _convert(option, kind, value)
        elif a.startswith("-") and len(a) > 1:
            raise _usage(f"unknown option {option}")
        else:
            positionals.append(a)
        i += 1
    if len(positionals) > len(positional_names):
        raise _usage(f"unexpected argument: {positionals[len(positional_names)]}")
    if len(positionals) < len(positional_names):
        raise _usage(f"missing argument: {positional_names[len(positionals)].upper()}")
    keywords.update(zip(positional_names, positionals))
    return keywords, json_out


def command(name, *args):
    """`moesim NAME ARGS...` on the typed API: the command's --json document (a dict or list)
    with "--json" in ARGS, else its text (a sweep: its CSV). Commands: model, topo, run, compare,
    layers, prune, collective, search, sweep. Raises ConfigError / UsageError as the functions
    do."""
    if name not in _COMMANDS:
        raise ValueError(f"moesim: unknown command '{name}'")
    argv = [os.fspath(a) if isinstance(a, os.PathLike) else str(a) for a in args]
    kw, json_out = _parse(name, argv)
    text = not json_out
    if name in ("model", "topo") and kw.get("sub") != "show":
        raise _usage(f"unknown subcommand '{kw.get('sub')}' (valid: show)")
    if name == "model":
        return _moesim.model_show(kw["card"], context=kw.get("context"), text=text)
    if name == "topo":
        return _moesim.topo_show(kw["topology"], text=text)
    if name == "run":
        scenario = kw.pop("scenario")
        return _moesim.run(scenario, kw.pop("overrides", []), text=text, **kw)[1]
    if name == "sweep":
        _, csv, summary = _moesim.sweep(**kw)
        sys.stderr.write(summary)
        return csv.decode()
    if name == "search":
        kw.setdefault("slo", None)
    fn = getattr(_moesim, name)
    first = kw.pop({"compare": "a", "collective": "topology"}.get(name, "scenario"), None)
    if name == "compare":
        return fn(first, kw.pop("b"), text=text, **kw)
    if name == "collective" and first is None:
        raise _usage("missing --topology")
    return fn(first, text=text, **kw)
