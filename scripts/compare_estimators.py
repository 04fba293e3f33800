#!/usr/bin/env python3
"""Which timing estimator calibrates best: re-derives every op's measured_ns from the samples a
replay recorded (samples_ns, samples_wait_ns; docs/schemas/measurement.md) with each estimator,
then runs the calibration loop's fit and validations on the results.

  scripts/compare_estimators.py BUILD_DIR CAL_DIR [--markdown]

CAL_DIR holds chat.meas.jsonl and burst.meas.jsonl from scripts/calibrate_cpu.sh (with an engine
that records samples). For each estimator (min, median, trimmed_mean) and for "all samples,
median" (the engine before noisy samples were left out), it writes rewritten copies under
CAL_DIR/estimators/NAME/, fits on chat, validates on burst (out of sample), fits on both and
validates on each (in sample), and prints the per-step compute MAPE and bias of each. It also
prints, per estimator, the spread between the two workloads' estimates of identical ops (same
op, dtype, tokens, FLOPs and bytes): a steadier estimator gives closer figures.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys


def trimmed_mean(values):
    v = sorted(values)
    cut = len(v) // 4
    kept = v[cut:len(v) - cut]
    return round(sum(kept) / len(kept))


def lower_median(values):
    v = sorted(values)
    return v[(len(v) - 1) // 2]


ESTIMATORS = {"min": min, "median": lower_median, "trimmed_mean": trimmed_mean}


def rewrite(src, dst, estimator, use_clean):
    """Rewrites measured_ns (and the step sums) of src into dst; returns {op key: ns}."""
    fn = ESTIMATORS[estimator]
    lines = [json.loads(line) for line in open(src) if line.strip()]
    header = lines[0]
    timing = header.get("timing", {})
    fraction = timing.get("max_wait_fraction", 0.1)
    repeats = header["repeats"]
    step_sums = {}
    estimates = {}
    for r in lines[1:]:
        if r["record"] != "op" or not r.get("measured") or "samples_ns" not in r:
            continue
        samples = r["samples_ns"]
        waits = r.get("samples_wait_ns")
        if not use_clean:
            values = samples[:repeats]  # the old engine: the first `repeats` runs, all kept
            r["noisy"] = False
        else:
            values = [s for s, w in zip(samples, waits or [0] * len(samples))
                      if w <= fraction * s] or samples
        r["measured_ns"] = fn(values)
        key = (r["step"], r["replica"], r["sim_gpu"])
        step_sums.setdefault(key, [0, 0])
        step_sums[key][0] += r["measured_ns"]
        step_sums[key][1] += r["measured_ns"] * r.get("layer_scale", 1)
        estimates.setdefault((r["op"], r["dtype"], r["tokens"], r["flops"], r["bytes"]),
                             []).append(r["measured_ns"])
    for r in lines[1:]:
        if r["record"] == "step":
            s = step_sums.get((r["step"], r["replica"], r["sim_gpu"]), [0, 0])
            r["measured_ns_sum"], r["scaled_ns_sum"] = s
    with open(dst, "w") as out:
        for r in lines:
            out.write(json.dumps(r) + "\n")
    return estimates


def validate(moesim, scenario, profile, meas, out):
    subprocess.run([moesim, "validate", scenario, "--profile", profile, "--measurements", meas,
                    "--out", out], check=True, stdout=subprocess.DEVNULL)
    rep = json.load(open(os.path.join(out, "report.json")))
    s = rep["per_step_compute"]
    return 100 * s["mape"], 100 * s["mean_rel_error"], 100 * rep["step_duration"]["mape"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("cal")
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    moesim = os.path.join(a.build, "apps", "moesim")
    scen = "scenarios/calibration/tiny-cpu-%s.toml"
    rows = []
    variants = [("median, all samples", "median", False)] + [(e, e, True) for e in ESTIMATORS]
    for label, est, clean in variants:
        d = os.path.join(a.cal, "estimators", label.replace(", ", "-").replace(" ", "_"))
        os.makedirs(d, exist_ok=True)
        est_by_op = {}
        for w in ("chat", "burst"):
            e = rewrite(os.path.join(a.cal, w + ".meas.jsonl"), os.path.join(d, w + ".meas.jsonl"),
                        est, clean)
            for k, v in e.items():
                est_by_op.setdefault(k, {})[w] = statistics.mean(v)
        # Identical ops measured in both workloads: relative difference of their estimates.
        diffs = [abs(v["chat"] - v["burst"]) / min(v["chat"], v["burst"])
                 for v in est_by_op.values() if len(v) == 2 and min(v.values()) > 0]
        fit_chat = os.path.join(d, "fit-chat.toml")
        fit_all = os.path.join(d, "fit-all.toml")
        subprocess.run([moesim, "calibrate", os.path.join(d, "chat.meas.jsonl"), "--out", fit_chat],
                       check=True, stdout=subprocess.DEVNULL)
        subprocess.run([moesim, "calibrate", os.path.join(d, "chat.meas.jsonl"),
                        os.path.join(d, "burst.meas.jsonl"), "--out", fit_all],
                       check=True, stdout=subprocess.DEVNULL)
        xval = validate(moesim, scen % "burst", fit_chat, os.path.join(d, "burst.meas.jsonl"),
                        os.path.join(d, "xval"))
        in_chat = validate(moesim, scen % "chat", fit_all, os.path.join(d, "chat.meas.jsonl"),
                           os.path.join(d, "in-chat"))
        in_burst = validate(moesim, scen % "burst", fit_all, os.path.join(d, "burst.meas.jsonl"),
                            os.path.join(d, "in-burst"))
        rows.append((label, xval, in_chat, in_burst, len(diffs),
                     100 * statistics.median(diffs) if diffs else float("nan")))
    if a.markdown:
        print("| estimator | chat -> burst per-step MAPE (bias) | all -> chat | all -> burst |"
              " same op in both workloads: median difference (n) |")
        print("| --- | --- | --- | --- | --- |")
    for label, xval, ic, ib, n, d in rows:
        if a.markdown:
            print("| %s | %.1f%% (%+.1f%%) | %.1f%% (%+.1f%%) | %.1f%% (%+.1f%%) | %.1f%% (%d) |"
                  % (label, xval[0], xval[1], ic[0], ic[1], ib[0], ib[1], d, n))
        else:
            print("%-22s xval %5.1f%% (bias %+5.1f%%)  in chat %5.1f%% (%+5.1f%%)  in burst %5.1f%%"
                  " (%+5.1f%%)  same-op diff %.1f%% (n=%d)"
                  % (label, xval[0], xval[1], ic[0], ic[1], ib[0], ib[1], d, n))
    return 0


if __name__ == "__main__":
    sys.exit(main())
