"""moesim.command(name, *args): a subcommand's command-line arguments on the typed functions.

Kept for code written against the argv form (`command("layers", path, "--json")`); new code
calls moesim.layers, moesim.prune, ... directly. Every command of the command line is here
(COMMANDS maps each to its function). The arguments are read as the command line reads them
(the same option names, strict numbers: 64-bit integers, finite floats) and passed to the typed
API; with "--json" the result is the command's JSON document, else its text. `engine` passes
its arguments to moesim-engine as `moesim engine` does.
"""

import os
import sys

from . import _moesim
from . import checks as ck
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
                               "--plan": ("plan", _STR),
                               "--max-duration-factor": ("max_duration_factor", _FLOAT)},
              {"--resume": "resume", "--progress": None}),
    "trace-fit": (["trace"], {"--kind": ("kind", _STR), "--start-s": ("start_s", _FLOAT),
                              "--end-s": ("end_s", _FLOAT),
                              "--max-requests": ("max_requests", _INT), "--seed": ("seed", _INT)},
                  {}),
    "calibrate": ([], {"--out": ("out", _STR), "-o": ("out", _STR), "--name": ("name", _STR),
                       "--max-segments": ("max_segments", _INT),
                       "--min-samples": ("min_samples", _INT),
                       "--min-size-gap": ("min_size_gap", _FLOAT),
                       "--max-spread": ("max_spread", _FLOAT), "--topology": ("topology", _STR),
                       "--nccl-tests": ("nccl_tests", "strs"),
                       "--nccl-ranks": ("nccl_ranks", _INT)},
                  {"--progress": None}),
    "validate": (["scenario"], {"--profile": ("profile", _STR),
                                "--measurements": ("measurements", _STR),
                                "--trace": ("trace", _STR), "--out": ("out_dir", _STR),
                                "-o": ("out_dir", _STR)}, {}),
    "derive-profile": (["from_profile"], {"--source-topology": ("source_topology", _STR),
                                          "--topology": ("topology", _STR),
                                          "--out": ("out", _STR), "-o": ("out", _STR),
                                          "--name": ("name", _STR)}, {}),
    "report": (["input"], {"--out": ("out", _STR), "-o": ("out", _STR),
                           "--gpu-price-per-hour": ("gpu_price_per_hour", _FLOAT),
                           "--title": ("title", _STR)}, {}),
}
# Commands whose positional arguments are a list (calibrate MEAS.jsonl..., sweep merge).
_VARIADIC = {"calibrate": "measurements"}
# Every command of the command line (apps/moesim/main.cc) and the function that is it.
COMMANDS = {"model": "model_show", "topo": "topo_show", "collective": "collective", "run": "run",
            "layers": "layers", "prune": "prune", "calibrate": "calibrate",
            "derive-profile": "derive_profile", "validate": "validate", "compare": "compare",
            "sweep": "sweep", "search": "search", "trace-fit": "trace_fit", "report": "report",
            "engine": "engine"}


def _usage(message):
    return UsageError(message, reason=message)


def _convert(option, kind, text):
    """An option's text as the command line reads it: integers in 64 bits, finite floats."""
    try:
        if kind == _INT:
            return ck.integer(option, int(text))
        if kind == _FLOAT:
            return ck.number(option, float(text))
        if kind in ("ints", "floats"):
            items = text.split(",")
            return [ck.integer(option, int(x)) if kind == "ints" else ck.number(option, float(x))
                    for x in items]
        if kind == "window":
            start, end = text.split(":")
            return (ck.number(option, float(start)), ck.number(option, float(end)))
        if kind == "strs":
            return text.split(",")
    except ValueError as e:
        if isinstance(e, UsageError):
            raise
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
    if name in _VARIADIC:
        if not positionals:
            raise _usage(f"missing argument: {_VARIADIC[name].upper()}")
        keywords[_VARIADIC[name]] = positionals
        return keywords, json_out
    if len(positionals) > len(positional_names):
        raise _usage(f"unexpected argument: {positionals[len(positional_names)]}")
    if len(positionals) < len(positional_names):
        raise _usage(f"missing argument: {positional_names[len(positionals)].upper()}")
    keywords.update(zip(positional_names, positionals))
    return keywords, json_out


def command(name, *args):
    """`moesim NAME ARGS...` on the typed API: the command's --json document (a dict or list)
    with "--json" in ARGS, else its text (a sweep: its CSV; sweep merge: None; report and
    derive-profile: their function's dict; engine: what moesim-engine printed). Every command of
    COMMANDS. Raises ConfigError / UsageError as the functions do."""
    if name not in COMMANDS:
        raise _usage(f"unknown command '{name}' (valid: {', '.join(COMMANDS)})")
    if name == "engine":
        from .external import engine
        return engine(*args)
    argv = [_arg_text(i, a) for i, a in enumerate(args)]
    if name == "sweep" and argv[:1] == ["merge"]:
        if len(argv) < 3:
            raise _usage("sweep merge OUT.csv SHARD.csv...: missing arguments")
        return _moesim.sweep_merge(argv[2:], argv[1])
    if name == "sweep" and argv[:1] == ["plan"]:
        kw, _ = _parse_plan(argv[1:])
        return _moesim.sweep_plan(kw["csv"], kw.get("plan"))
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
    if name == "report":
        from .external import report
        if "out" not in kw:
            raise _usage("--out REPORT.html is required")
        return report(kw.pop("input"), kw.pop("out"), **kw)
    if name == "derive-profile":
        return _moesim.derive_profile(kw.pop("from_profile"), **kw)
    if name == "trace-fit":
        return _moesim.trace_fit(kw.pop("trace"), text=text, **kw)
    if name == "calibrate":
        return _moesim.calibrate(kw.pop("measurements"), text=text, **kw)
    fn = getattr(_moesim, name)
    if name == "validate":
        return fn(kw.pop("scenario"), text=text, **kw)
    first = kw.pop({"compare": "a", "collective": "topology"}.get(name, "scenario"), None)
    if name == "compare":
        return fn(first, kw.pop("b"), text=text, **kw)
    if name == "collective" and first is None:
        raise _usage("missing --topology")
    return fn(first, text=text, **kw)


def _arg_text(i, a):
    if isinstance(a, os.PathLike):
        return ck.path(f"args[{i}]", a)
    if isinstance(a, bool) or not isinstance(a, (str, int, float)):
        raise _usage(f"args[{i}]: want a string, path or number, got {type(a).__name__} {a!r}")
    return ck.text(f"args[{i}]", a if isinstance(a, str) else str(a))


def _parse_plan(args):
    kw = {}
    rest = []
    i = 0
    while i < len(args):
        option, eq, value = args[i].partition("=")
        if option == "--plan":
            if not eq:
                i += 1
                if i >= len(args):
                    raise _usage("option --plan needs a value")
                value = args[i]
            kw["plan"] = value
        elif args[i].startswith("-") and len(args[i]) > 1:
            raise _usage(f"unknown option {option}")
        else:
            rest.append(args[i])
        i += 1
    if len(rest) != 1:
        raise _usage("sweep plan SWEEP.csv [--plan FILE]: want one CSV")
    kw["csv"] = rest[0]
    return kw, False
