#!/usr/bin/env python3
"""Serving validation experiment (docs/calibration.md, "Serving validation").

`run`: for every rate of a sweep, export the scenario's request trace at that rate
(`moesim run SCENARIO --set RATE_KEY=R --export-requests`), serve each trace REPEATS times
with `moesim-engine serve` (one run at a time, the repeats interleaved over the rates so that a
drift of the machine spreads over every rate instead of biasing one), then compare with
`moesim validate SCENARIO --profile PROFILE --serving RUN_DIR... --out OUT/validate`.

`delta`: given the validation reports of a policy pair (e.g. concurrency cap 32 vs 128, each a
`run` of its own), print per load point and metric the measured delta (engine means, B - A) beside
the predicted one (re-simulations, B - A): whether the signs agree and the size ratio.

Python 3 standard library only. --dry-run prints the commands of `run` without running them.
"""

import argparse
import json
import os
import shlex
import subprocess
import sys

RATE_KEY = "workload.arrival.rate_per_s"


def rate_label(rate):
    return "rate-" + ("%g" % rate).replace("+", "")


def plan(args):
    """The experiment's commands in order: (kind, argv). Paths are under args.out."""
    sets = []
    deployment_sets = []  # the validation replaces [workload]: its overrides are the export's
    for s in args.set:
        sets += ["--set", s]
        if not s.startswith("workload."):
            deployment_sets += ["--set", s]
    traces = {}
    cmds = []
    for r in args.rates:
        trace = os.path.join(args.out, "traces", rate_label(r) + ".jsonl")
        traces[r] = trace
        cmds.append(("export", [args.moesim, "run", args.scenario, "--set",
                                "%s=%r" % (args.rate_key, r)] + sets +
                     ["--export-requests", trace]))
    run_dirs = []
    for k in range(args.repeats):
        for r in args.rates:
            d = os.path.join(args.out, "serve", rate_label(r), "run-%d" % k)
            run_dirs.append(d)
            cmds.append(("serve", [args.engine, "serve", traces[r], "--out", d] +
                         args.engine_arg))
    cmds.append(("validate", [args.moesim, "validate", args.scenario, "--profile", args.profile]
                 + deployment_sets + ["--out", os.path.join(args.out, "validate"), "--serving"] + run_dirs))
    return cmds


def run_experiment(args):
    if args.repeats < 1:
        sys.exit("serving_validation.py: --repeats must be >= 1")
    cmds = plan(args)
    for kind, argv in cmds:
        print("+ " + " ".join(shlex.quote(a) for a in argv), flush=True)
        if args.dry_run:
            continue
        if kind == "export":
            os.makedirs(os.path.dirname(argv[-1]), exist_ok=True)
        if kind == "serve":
            os.makedirs(os.path.dirname(argv[argv.index("--out") + 1]), exist_ok=True)
        # moesim prints the report; the exports' and serves' summaries are kept out of the way.
        out = None if kind == "validate" else subprocess.DEVNULL
        rc = subprocess.run(argv, stdout=out).returncode
        if rc != 0:
            sys.exit("serving_validation.py: %s failed (exit %d)" % (kind, rc))
    return 0


def load_report(path):
    if os.path.isdir(path):
        path = os.path.join(path, "report.json")
    with open(path) as f:
        report = json.load(f)
    if report.get("schema") != "moesim.serving_validation.v1":
        sys.exit("serving_validation.py: %s: not a serving validation report" % path)
    return report


def rel(b, a):
    return None if a in (None, 0) or b is None else b / a - 1


def sign(x):
    return (x > 0) - (x < 0)


def deltas(a, b):
    """Per (load point, metric): measured and predicted B - A. Points pair up in offered-rate
    order (the same rate list on both sides)."""
    pa, pb = a["points"], b["points"]
    if len(pa) != len(pb):
        sys.exit("serving_validation.py: the reports have %d and %d load points" %
                 (len(pa), len(pb)))
    rows = []
    for x, y in zip(pa, pb):
        for name, ma in x["metrics"].items():
            mb = y["metrics"][name]
            ea, eb, sa, sb = ma["engine_mean"], mb["engine_mean"], ma["simulated"], mb["simulated"]
            if None in (ea, eb, sa, sb):
                continue
            measured, predicted = eb - ea, sb - sa
            rows.append({
                "rate_a": x["offered_rate_per_s"], "rate_b": y["offered_rate_per_s"],
                "side": x["side"], "metric": name,
                "measured": measured, "predicted": predicted,
                "measured_rel": rel(eb, ea), "predicted_rel": rel(sb, sa),
                "sign_agrees": sign(measured) == sign(predicted),
                "size_ratio": predicted / measured if measured != 0 else None,
            })
    return rows


def fmt(x, pct=False):
    if x is None:
        return "-"
    return "%+.1f%%" % (100 * x) if pct else "%.4g" % x


def print_deltas(args):
    a, b = load_report(args.a), load_report(args.b)
    rows = deltas(a, b)
    print("delta = %s - %s (measured: engine means; predicted: re-simulations)" %
          (args.label_b, args.label_a))
    print("| offered req/s | side | metric | measured | measured rel | predicted | predicted rel |"
          " sign | predicted / measured |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            fmt(r["rate_a"]), r["side"], r["metric"], fmt(r["measured"]),
            fmt(r["measured_rel"], True), fmt(r["predicted"]), fmt(r["predicted_rel"], True),
            "agrees" if r["sign_agrees"] else "WRONG", fmt(r["size_ratio"])))
    ka, kb = a["knee"], b["knee"]
    km = None if None in (ka["measured"]["rate_per_s"], kb["measured"]["rate_per_s"]) else \
        kb["measured"]["rate_per_s"] - ka["measured"]["rate_per_s"]
    kp = None if None in (ka["predicted"]["rate_per_s"], kb["predicted"]["rate_per_s"]) else \
        kb["predicted"]["rate_per_s"] - ka["predicted"]["rate_per_s"]
    print("knee delta (req/s): measured %s, predicted %s" % (fmt(km), fmt(kp)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"a": args.label_a, "b": args.label_b, "rows": rows,
                       "knee": {"measured": km, "predicted": kp}}, f, indent=2)
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="export, serve REPEATS times per rate, validate")
    r.add_argument("--scenario", required=True)
    r.add_argument("--rates", required=True,
                   type=lambda s: [float(x) for x in s.split(",")],
                   help="comma-separated arrival rates, requests/s")
    r.add_argument("--rate-key", default=RATE_KEY,
                   help="the scenario key the rate sets (default %s)" % RATE_KEY)
    r.add_argument("--repeats", type=int, default=3, help="serve runs per trace (default 3)")
    r.add_argument("--moesim", default="build/apps/moesim")
    r.add_argument("--engine", default="build/engine/moesim-engine")
    r.add_argument("--profile", required=True, help="fitted from bench / replay only")
    r.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="scenario override for the export and the validation (repeatable)")
    r.add_argument("--engine-arg", action="append", default=[], metavar="ARG",
                   help="passed to moesim-engine serve (repeatable)")
    r.add_argument("--out", required=True)
    r.add_argument("--dry-run", action="store_true", help="print the commands only")
    d = sub.add_parser("delta", help="predicted vs measured delta of a policy pair")
    d.add_argument("a", help="report.json (or its directory) of policy A")
    d.add_argument("b", help="report.json (or its directory) of policy B")
    d.add_argument("--label-a", default="A")
    d.add_argument("--label-b", default="B")
    d.add_argument("--json", help="also write the rows as JSON")
    args = p.parse_args(argv)
    return run_experiment(args) if args.cmd == "run" else print_deltas(args)


if __name__ == "__main__":
    sys.exit(main())
