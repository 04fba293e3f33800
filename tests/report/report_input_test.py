#!/usr/bin/env python3
"""ctest report.bad_input: `moesim report` on inputs with one bad value each, by class (a file
of the wrong type, a wrong JSON type, NaN, a negative latency, a value out of range, a missing
column, an unknown enum, a routing entry outside the header) in a run directory, a sweep CSV and a
search JSON: each must exit 2 with one line naming the file and the row and column (CSV) or key
path (JSON), never draw a page from it nor print a traceback. Also: an error the checks did not
foresee is one line (exit 1), and the price option keeps every digit and refuses infinity.

Cases run in process through the package's main() (the code `moesim report` executes, exit code
and stderr included); three also through the `moesim report` binary.

usage: report_input_test.py --moesim BIN --work DIR"""

import argparse
import contextlib
import io
import json
import os
import shutil
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from moesim_report import __main__ as cli_main  # noqa: E402
from moesim_report import run_report  # noqa: E402
from report_mutation_test import copy_input, fake_pyplot, make_inputs  # noqa: E402

FAILS = []


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL", what)


def edit_json(path, fn):
    with open(path) as f:
        doc = json.load(f)
    fn(doc)
    with open(path, "w") as f:
        json.dump(doc, f)


def edit_text(path, old, new, count=1):
    with open(path) as f:
        text = f.read()
    if old not in text:
        raise SystemExit(f"{path}: {old!r} not found: the test's input changed")
    with open(path, "w") as f:
        f.write(text.replace(old, new, count))


def edit_csv(path, row, column, value):
    """Cell (data row from 1, column name) set to `value` (text)."""
    with open(path) as f:
        lines = f.read().split("\n")
    header = lines[0].split(",")
    cells = lines[row].split(",")
    cells[header.index(column)] = value
    lines[row] = ",".join(cells)
    with open(path, "w") as f:
        f.write("\n".join(lines))


def drop_column(path, column):
    with open(path) as f:
        lines = f.read().split("\n")
    j = lines[0].split(",").index(column)
    out = []
    for line in lines:
        cells = line.split(",")
        if line:
            del cells[j]
        out.append(",".join(cells))
    with open(path, "w") as f:
        f.write("\n".join(out))


def set_key(*path_value):
    *keys, value = path_value

    def fn(doc):
        d = doc
        for k in keys[:-1]:
            d = d[k]
        d[keys[-1]] = value
    return fn


def first_routing_expert(path, expert):
    """The first routing entry of the first step's first MoE layer gets expert `expert`."""
    with open(path) as f:
        lines = f.read().split("\n")
    for i, line in enumerate(lines[1:], 1):
        rec = json.loads(line) if line else {}
        for layer in rec.get("layers", []):
            if layer.get("routing"):
                layer["routing"][0][1] = expert
                lines[i] = json.dumps(rec)
                with open(path, "w") as f:
                    f.write("\n".join(lines))
                return
    raise SystemExit(f"{path}: no routing entry")


def moe_experts(path, value):
    with open(path) as f:
        lines = f.read().split("\n")
    header = json.loads(lines[0])
    for layer in header["model"]["layers"]:
        if layer["ffn"]["kind"] == "moe":
            layer["ffn"]["num_routed_experts"] = value
    lines[0] = json.dumps(header)
    with open(path, "w") as f:
        f.write("\n".join(lines))


# (name, input kind, file in a run directory or None for the input itself, edit, expected
# message after "moesim: error: " and the file's path).
CASES = [
    ("summary: an object is a string", "run", "summary.json",
     lambda p: edit_json(p, set_key("requests", "many")),
     ": requests: must be an object, got the string 'many'"),
    ("summary: attainment above 1", "run", "summary.json",
     lambda p: edit_json(p, set_key("slo", "attainment", 1.5)),
     ": slo.attainment: must be <= 1, got 1.5"),
    ("summary: NaN", "run", "summary.json",
     lambda p: edit_text(p, '"kv_high_water_fraction": ', '"kv_high_water_fraction": NaN, "x": '),
     ": NaN is not JSON (moesim writes null for a missing figure)"),
    ("summary: a negative latency", "run", "summary.json",
     lambda p: edit_json(p, set_key("ttft_ms", "p99", -4.0)),
     ": ttft_ms.p99: must be >= 0, got -4.0"),
    ("summary: a bool that is a string", "run", "summary.json",
     lambda p: edit_json(p, set_key("conservation_ok", "yes")),
     ": conservation_ok: must be true or false, got the string 'yes'"),
    ("summary: a count that is a float", "run", "summary.json",
     lambda p: edit_json(p, set_key("actions", "cap_set", 1.5)),
     ": actions.cap_set: must be an integer, got 1.5"),
    ("summary: the file is a list", "run", "summary.json",
     lambda p: edit_json(p, lambda d: None) or open(p, "w").write("[1, 2]"),
     ": not a moesim run summary (no event_digest)"),
    ("requests: a negative latency", "run", "requests.csv",
     lambda p: edit_csv(p, 3, "ttft_ms", "-3.5"),
     ": row 3, column ttft_ms: must be >= 0, got -3.5"),
    ("requests: nan", "run", "requests.csv", lambda p: edit_csv(p, 2, "tpot_ms", "nan"),
     ": row 2, column tpot_ms: not a number: 'nan'"),
    ("requests: inf", "run", "requests.csv", lambda p: edit_csv(p, 4, "e2e_ms", "inf"),
     ": row 4, column e2e_ms: inf is not a finite number"),
    ("requests: garbage", "run", "requests.csv", lambda p: edit_csv(p, 1, "arrival_ns", "soon"),
     ": row 1, column arrival_ns: not a number: 'soon'"),
    ("requests: a fraction of a nanosecond", "run", "requests.csv",
     lambda p: edit_csv(p, 1, "done_ns", "12.5"),
     ": row 1, column done_ns: not an integer: 12.5"),
    ("requests: an unknown outcome", "run", "requests.csv",
     lambda p: edit_csv(p, 5, "outcome", "done"),
     ": row 5, column outcome: must be one of completed, rejected, in_flight, got 'done'"),
    ("requests: a missing column", "run", "requests.csv", lambda p: drop_column(p, "e2e_ms"),
     ": no column e2e_ms in the header (moesim writes it)"),
    ("requests: an empty required cell", "run", "requests.csv",
     lambda p: edit_csv(p, 2, "generated_tokens", ""),
     ": row 2, column generated_tokens: empty: moesim always writes a value here"),
    ("steps: a fraction above 1", "run", "steps.csv",
     lambda p: edit_csv(p, 7, "kv_used_fraction_max", "1.5"),
     ": row 7, column kv_used_fraction_max: must be <= 1, got 1.5"),
    ("steps: a negative duration", "run", "steps.csv",
     lambda p: edit_csv(p, 2, "duration_ns", "-5"),
     ": row 2, column duration_ns: must be >= 0, got -5"),
    ("steps: more blocks than the pool", "run", "steps.csv",
     lambda p: edit_csv(p, 1, "kv_blocks", "1"),
     ": row 1, column kv_owned_blocks: owned 3 + cached 0 blocks exceed the pool's kv_blocks 1"),
    ("trace: a duration that is a string", "run", "trace.json",
     lambda p: edit_json(p, lambda d: [e.update(dur="long") for e in d["traceEvents"]
                                       if e.get("ph") == "X"][:1]),
     None),  # the index of the first span: checked by prefix below
    ("trace: events that are an object", "run", "trace.json",
     lambda p: edit_json(p, set_key("traceEvents", {})),
     ": traceEvents: must be a list, got an object"),
    ("step trace: an expert outside the layer", "run", "steps.jsonl",
     lambda p: first_routing_expert(p, 16),
     None),  # "FILE:N: layers[i].routing[0]: expert 16 outside the layer's 16 routed experts"
    ("step trace: absurd expert count", "run", "steps.jsonl",
     lambda p: moe_experts(p, 10**12),
     None),  # "FILE:1: model.layers[i].ffn.num_routed_experts: must be <= 65536, ..."
    ("run.json: a string count", "run", "resolved/run.json",
     lambda p: edit_json(p, set_key("replicas", "2")),
     ": replicas: must be an integer or null, got the string '2'"),
    ("scenario.toml: a table that is a number", "run", "resolved/scenario.toml",
     lambda p: edit_text(p, "[deployment]", "deployment = 3\n[deployment_x]"),
     ": deployment: must be an object, got 3"),
    ("sweep: text in a number column", "sweep", None,
     lambda p: edit_csv(p, 2, "slo_attainment", "abc"),
     ": row 2, column slo_attainment: not a number: 'abc'"),
    ("sweep: an unknown status", "sweep", None, lambda p: edit_csv(p, 1, "status", "weird"),
     ": row 1, column status: must be one of ok, error, conservation_broken, got 'weird'"),
    ("sweep: a negative latency", "sweep", None, lambda p: edit_csv(p, 3, "ttft_p99_ms", "-1"),
     ": row 3, column ttft_p99_ms: must be >= 0, got -1"),
    ("sweep: no GPUs", "sweep", None, lambda p: edit_csv(p, 1, "num_gpus", "0"),
     ": row 1, column num_gpus: must be >= 1, got 0"),
    ("sweep: a missing column", "sweep", None, lambda p: drop_column(p, "output_tokens_per_s"),
     ": no column output_tokens_per_s in the header (moesim writes it)"),
    ("search: a rate that is a string", "search", None,
     lambda p: edit_json(p, set_key("configs", 0, "max_rate_per_s", "fast")),
     ": configs[0].max_rate_per_s: must be a number or null, got the string 'fast'"),
    ("search: an attainment above 1", "search", None,
     lambda p: edit_json(p, set_key("configs", 0, "probes", 0, "attainment", 2)),
     ": configs[0].probes[0].attainment: must be <= 1, got 2"),
    ("search: no configurations", "search", None,
     lambda p: edit_json(p, set_key("configs", [])),
     ": configs: empty: a search has at least one configuration"),
    ("search: a parameter that is a list", "search", None,
     lambda p: edit_json(p, set_key("configs", 0, "parameters", "scheduler.max_seqs", [1])),
     ": configs[0].parameters.scheduler.max_seqs: must be a string or a number, got a list"),
]

PREFIX_ONLY = {  # expected message (after the file) of the cases whose index comes from the data
    "trace: a duration that is a string": ": traceEvents[",
    "step trace: an expert outside the layer": ":2: layers[",
    "step trace: absurd expert count": ":1: model.layers[",
}


def run_main(args):
    """The report's main() in process: (exit code, stderr lines)."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()), \
                fake_pyplot():
            code = cli_main.main(args)
    except Exception as e:  # noqa: BLE001 - what the command line printed as a traceback
        return f"a traceback ({type(e).__name__}: {e})", []
    return code, err.getvalue().splitlines()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--moesim", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    rd, sweep, search = make_inputs(a.moesim, a.work)
    bases = {"run": rd, "sweep": sweep, "search": search}
    for kind, path in bases.items():
        code, err = run_main([path, "--out", os.path.join(a.work, f"{kind}.html")])
        check(code == 0, f"the unmutated {kind} input: exit {code} {err}")
    by_cli = {}
    for n, (name, kind, rel, edit, expected) in enumerate(CASES):
        inp = copy_input(bases[kind], os.path.join(a.work, "cases", f"{n:02d}"))
        target = os.path.join(inp, rel) if rel else inp
        edit(target)
        out = os.path.join(a.work, "cases", f"{n:02d}.html")
        code, err = run_main([inp, "--out", out])
        want = "moesim: error: " + target + (expected or PREFIX_ONLY[name])
        ok = code == 2 and len(err) == 1 and err[0].startswith(want)
        if expected:
            ok = ok and err[0] == want
        check(ok, f"{name}: exit {code}, stderr {err}; want exit 2 and {want!r}")
        check(not os.path.exists(out), f"{name}: a page was written")
        if kind not in by_cli:
            by_cli[kind] = (inp, out, want)
    # The same through the binary (which replaces itself with the package's interpreter).
    for kind, (inp, out, want) in by_cli.items():
        r = subprocess.run([a.moesim, "report", inp, "--out", out], capture_output=True,
                           text=True)
        lines = r.stderr.strip().split("\n")
        check(r.returncode == 2 and len(lines) == 1 and lines[0].startswith(want),
              f"moesim report on the first {kind} case: exit {r.returncode}, {r.stderr!r}")

    # An error the checks did not foresee: one line naming the input, exit 1, no traceback.
    saved = run_report.build
    run_report.build = lambda page, run: {}["no such key"]
    try:
        code, err = run_main([rd, "--out", os.path.join(a.work, "bug.html")])
    finally:
        run_report.build = saved
    check(code == 1 and len(err) == 1 and err[0].startswith(f"moesim: error: {rd}: the report "
                                                            "failed: KeyError: 'no such key' at "),
          f"an unforeseen error: exit {code}, {err}")

    # The price: every digit reaches the package (std::to_string made 1e-7 "0.000000", refused),
    # and an infinite price is refused.
    r = subprocess.run([a.moesim, "report", sweep, "--out", os.path.join(a.work, "p.html"),
                        "--gpu-price-per-hour", "1e-7"], capture_output=True, text=True)
    check(r.returncode == 0, f"--gpu-price-per-hour 1e-7: exit {r.returncode} {r.stderr!r}")
    if r.returncode == 0:
        with open(os.path.join(a.work, "p.html")) as f:
            check("price: $1e-07 per GPU-hour" in f.read(), "--gpu-price-per-hour 1e-7: price")
    r = subprocess.run([a.moesim, "report", sweep, "--out", os.path.join(a.work, "q.html"),
                        "--gpu-price-per-hour", "inf"], capture_output=True, text=True)
    check(r.returncode == 2 and not os.path.exists(os.path.join(a.work, "q.html")),
          f"--gpu-price-per-hour inf: exit {r.returncode} {r.stderr!r}")

    print(f"report.bad_input: {len(CASES)} cases; {len(FAILS)} failure(s)")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
