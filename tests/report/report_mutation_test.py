#!/usr/bin/env python3
"""ctest report.mutation: the report's readers on mutated inputs (the libFuzzer targets of
tests/fuzz/ cannot reach Python, so this is their deterministic counterpart).

From one small run directory (tests/report/mutation_run.toml: summary.json, requests.csv,
steps.csv, trace.json, the step trace, resolved/), one sweep CSV and one search JSON, it makes
MUTANTS inputs with Python's `random` seeded with SEED: a cell of a CSV replaced by an empty,
negative, fractional, huge, non-finite or non-numeric text, a column dropped or renamed, a row cut
short, duplicated or swapped, bytes inserted or the file truncated; a JSON value replaced by a
value of another type or range (null, a string, a negative or huge number, a list, an object), a
key deleted, NaN written into the text; a JSONL line deleted, duplicated or mutated as JSON. Each
mutant must give either BadInput whose message is one line naming the mutated file (the CLI prints
it and exits 2), or a page; any other exception is a finding, printed with the mutation that
caused it.

Pages: matplotlib's figure set-up costs ~50 ms per figure, a second per run page, so the pages of
accepted mutants are built on a stand-in for pyplot that takes every call and checks that the
positions of lines, limits and texts are finite numbers (matplotlib refuses the others); with
--real-pages N the first N accepted mutants of each kind are drawn by matplotlib itself (default 0:
report.generator and report.browser draw real pages). One refused mutant also goes through
`moesim report` (exit 2 and one line on stderr). About 5.4 CPU-seconds in all.

usage: report_mutation_test.py --moesim BIN --work DIR [--mutants N] [--seed S] [--real-pages N]"""

import argparse
import copy
import json
import math
import os
import random
import shutil
import subprocess
import sys
import time
import traceback

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "python"))

from moesim_report import BadInput, build_report, markup, run_report, study_report  # noqa: E402

MUTANTS = 300
SEED = 20261207
REAL_PAGES = 0  # accepted mutants per input kind drawn by matplotlib itself (--real-pages)
CLI_RUNS = 1  # refused mutants also run through `moesim report`

CELL_TEXTS = ["", "nan", "NaN", "inf", "-inf", "-1", "-0.5", "0.5", "1.5", "1e400", "1e300",
              "99999999999999999999", "abc", "true", "\"", "0", "-9223372036854775809", " 3"]
JSON_VALUES = [None, "x", "", -1, -1.5, 0, 0.5, 2, 1e300, 2**70, True, [], {}, [1, 2], {"a": 1},
               "9" * 300]


# --- mutations -----------------------------------------------------------------------------------

def mutate_csv(text, rng):
    lines = text.split("\n")
    header = lines[0].split(",")
    body = [i for i in range(1, len(lines)) if lines[i]]
    op = rng.choice(["cell", "cell", "cell", "cell", "drop_column", "rename_column", "short_row",
                     "long_row", "duplicate_row", "swap_rows", "truncate", "bytes"])
    if op in ("cell", "short_row", "long_row") and body:
        i = rng.choice(body)
        cells = lines[i].split(",")
        j = rng.randrange(len(cells))
        if op == "cell":
            new = rng.choice(CELL_TEXTS)
            what = f"row {i}, column {header[j] if j < len(header) else j}: {cells[j]!r} -> {new!r}"
            cells[j] = new
        elif op == "short_row":
            cells = cells[:j]
            what = f"row {i} cut to {j} fields"
        else:
            cells.append("7")
            what = f"row {i} with a field more"
        lines[i] = ",".join(cells)
        return "\n".join(lines), what
    if op in ("drop_column", "rename_column"):
        j = rng.randrange(len(header))
        for i in range(len(lines)):
            if lines[i]:
                cells = lines[i].split(",")
                if j < len(cells):
                    if op == "drop_column":
                        del cells[j]
                    elif i == 0:
                        cells[j] = cells[j] + "_x"
                lines[i] = ",".join(cells)
        return "\n".join(lines), f"{op} {header[j]}"
    if op == "duplicate_row" and body:
        i = rng.choice(body)
        lines.insert(i, lines[i])
        return "\n".join(lines), f"row {i} twice"
    if op == "swap_rows" and len(body) > 1:
        i, k = rng.sample(body, 2)
        lines[i], lines[k] = lines[k], lines[i]
        return "\n".join(lines), f"rows {i} and {k} swapped"
    return mutate_bytes(text, rng)


def mutate_bytes(text, rng):
    pos = rng.randrange(len(text) + 1)
    if rng.random() < 0.4:
        return text[:pos], f"truncated at {pos}"
    junk = rng.choice(["\x00", "\udcff", "\"", "\n", ",", "{", "]", "\ufffd", "NaN", "-", "e9"])
    return text[:pos] + junk + text[pos:], f"{junk!r} inserted at {pos}"


def _paths(doc, prefix=()):
    """Every (container path, key) of a JSON value."""
    out = []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out.append((prefix, k))
            out += _paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out.append((prefix, i))
            out += _paths(v, prefix + (i,))
    return out


def mutate_value(doc, rng):
    """A copy of doc with one value replaced or deleted; (copy, description)."""
    doc = copy.deepcopy(doc)
    paths = _paths(doc)
    if not paths:
        return rng.choice(JSON_VALUES), "document replaced"
    prefix, key = rng.choice(paths)
    parent = doc
    for k in prefix:
        parent = parent[k]
    where = "/".join(str(k) for k in prefix + (key,))
    if isinstance(parent, dict) and rng.random() < 0.2:
        del parent[key]
        return doc, f"{where} deleted"
    old = parent[key]
    if isinstance(old, (int, float)) and not isinstance(old, bool) and rng.random() < 0.5:
        new = rng.choice([-old - 1, old * 1e6 + 1, -1e-3, old + 0.5])
    else:
        new = rng.choice(JSON_VALUES)
    parent[key] = new
    return doc, f"{where}: {str(old)[:30]} -> {str(new)[:30]}"


def mutate_json(text, rng):
    if rng.random() < 0.15:
        if rng.random() < 0.5:
            return mutate_bytes(text, rng)
        # A number written as NaN / Infinity (Python's json reads them; moesim never writes them).
        digits = [i for i, ch in enumerate(text) if ch.isdigit() and text[i - 1] in ":,["]
        if digits:
            i = rng.choice(digits)
            j = i
            while j < len(text) and (text[j].isdigit() or text[j] in ".e-+"):
                j += 1
            new = rng.choice(["NaN", "Infinity", "-Infinity", "1e999"])
            return text[:i] + new + text[j:], f"{text[i:j]} -> {new} at {i}"
    doc, what = mutate_value(json.loads(text), rng)
    return json.dumps(doc), what


def mutate_jsonl(text, rng):
    lines = [l for l in text.split("\n") if l]
    i = rng.randrange(len(lines))
    op = rng.random()
    if op < 0.1:
        del lines[i]
        what = f"line {i + 1} deleted"
    elif op < 0.2:
        lines.insert(i, lines[i])
        what = f"line {i + 1} twice"
    else:
        lines[i], what = mutate_json(lines[i], rng)
        what = f"line {i + 1}: {what}"
    return "\n".join(lines) + "\n", what


# --- a stand-in for pyplot -----------------------------------------------------------------------

class _Stub:
    """Takes any call or attribute; positions given to the calls that matplotlib checks must be
    finite."""
    CHECKED = {"axvline", "axhline", "set_xlim", "set_ylim", "text", "annotate"}

    def __init__(self, name="stub"):
        self._name = name

    def __getattr__(self, name):
        if name == "get_legend_handles_labels":
            return lambda *a, **k: ([], [])

        def call(*args, **kwargs):
            if name in self.CHECKED:
                for a in list(args) + list(kwargs.values()):
                    for x in (a if isinstance(a, tuple) else (a,)):
                        if isinstance(x, float) and not math.isfinite(x):
                            raise ValueError(f"{name}: a position that is not finite: {x}")
            return _Stub(name)
        return call

    def __iter__(self):
        return iter([0.5, 0.5, 0.5, 1.0])


class _FakePyplot:
    def subplots(self, nrows=1, ncols=1, **kwargs):
        axes = _Stub("ax") if nrows * ncols == 1 else tuple(_Stub("ax") for _ in range(nrows))
        return _Stub("fig"), axes

    def close(self, fig):
        pass


class fake_pyplot:
    """with fake_pyplot(): pages are built without matplotlib."""

    def __enter__(self):
        self.saved = (run_report.plt, study_report.plt, markup.plt, markup._svg_markup,
                      markup._png_data_uri)
        fake = _FakePyplot()
        run_report.plt = study_report.plt = markup.plt = fake
        markup._svg_markup = lambda fig: "<svg><path/></svg>"
        markup._png_data_uri = lambda fig: "data:image/png;base64,"

    def __exit__(self, *exc):
        (run_report.plt, study_report.plt, markup.plt, markup._svg_markup,
         markup._png_data_uri) = self.saved


# --- the test ------------------------------------------------------------------------------------

def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit {r.returncode}\n{r.stderr[-2000:]}")


def make_inputs(moesim, work):
    rd = os.path.join(work, "base", "run")
    run([moesim, "run", "tests/report/mutation_run.toml", "--out", rd, "--record",
         os.path.join(rd, "steps.jsonl"), "--record-steps", "3"])
    sweep = os.path.join(work, "base", "sweep.csv")
    run([moesim, "sweep", "tests/report/tiny_sweep.toml", "--threads", "1", "--out", sweep])
    search = os.path.join(work, "base", "search.json")
    r = subprocess.run([moesim, "search", "tests/data/study/tiny.toml", "--grid",
                        "tests/report/tiny_sweep.toml", "--slo", "ttft_p99_ms=200,tpot_p99_ms=20",
                        "--threads", "1", "--tolerance", "0.5", "--max-doublings", "1",
                        "--replications", "1", "--json"], capture_output=True, text=True, cwd=REPO)
    if r.returncode != 0:
        raise SystemExit(f"moesim search: exit {r.returncode}\n{r.stderr[-2000:]}")
    with open(search, "w") as f:
        f.write(r.stdout)
    return rd, sweep, search


def copy_input(path, directory):
    """A copy of the input `path` (a file or a run directory) in `directory`; its path."""
    os.makedirs(directory, exist_ok=True)
    dst = os.path.join(directory, os.path.basename(path))
    if os.path.isdir(path):
        shutil.copytree(path, dst)
    else:
        shutil.copy(path, dst)
    return dst


# (kind, file in the run directory or the input itself, mutator); weights by how much each file
# drives the page.
TARGETS = [("run", "summary.json", mutate_json, 3), ("run", "requests.csv", mutate_csv, 3),
           ("run", "steps.csv", mutate_csv, 3), ("run", "trace.json", mutate_json, 3),
           ("run", "steps.jsonl", mutate_jsonl, 3), ("run", "resolved/run.json", mutate_json, 1),
           ("run", "resolved/scenario.toml", mutate_bytes, 1), ("sweep", None, mutate_csv, 4),
           ("search", None, mutate_json, 4)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--moesim", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--mutants", type=int, default=MUTANTS)
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--real-pages", type=int, default=REAL_PAGES,
                    help="accepted mutants per input kind drawn with matplotlib itself")
    a = ap.parse_args()
    t0 = time.time()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    rd, sweep, search = make_inputs(a.moesim, a.work)
    bases = {"run": rd, "sweep": sweep, "search": search}
    with fake_pyplot():
        for path in bases.values():  # the unmutated inputs give pages
            build_report(path)
    # One working copy per kind, mutated in place and restored after each mutant.
    work = {}
    for kind, path in bases.items():
        work[kind] = copy_input(path, os.path.join(a.work, "m", kind))
    rng = random.Random(a.seed)
    weights = [t[3] for t in TARGETS]
    findings, refused, accepted, real, cli = [], 0, 0, {}, []
    for n in range(a.mutants):
        kind, rel, mutator, _ = rng.choices(TARGETS, weights)[0]
        inp = work[kind]
        target = os.path.join(inp, rel) if rel else inp
        with open(target, encoding="utf-8") as f:
            text = f.read()
        new, what = mutator(text, rng)
        with open(target, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(new)
        label = f"mutant {n} ({kind} {rel or os.path.basename(target)}: {what})"
        try:
            if real.get(kind, 0) < a.real_pages:
                build_report(inp)
                real[kind] = real.get(kind, 0) + 1
            else:
                with fake_pyplot():
                    build_report(inp)
            accepted += 1
        except BadInput as e:
            refused += 1
            msg = str(e)
            if "\n" in msg or not (target in msg or inp in msg):
                findings.append(f"{label}: the message is not one line naming the file: {msg!r}")
            elif len(cli) < CLI_RUNS:
                cli.append((copy_input(inp, os.path.join(a.work, "cli", f"{n:04d}")), label))
        except Exception as e:  # noqa: BLE001 - the finding
            tb = traceback.format_exception(e)
            findings.append(f"{label}: {type(e).__name__}: {e}\n" + "".join(tb[-3:]))
        with open(target, "w", encoding="utf-8") as f:
            f.write(text)
    for inp, label in cli:
        r = subprocess.run([a.moesim, "report", inp, "--out", inp.rstrip("/") + ".html"],
                           capture_output=True, text=True)
        lines = r.stderr.strip().split("\n")
        if r.returncode != 2 or len(lines) != 1 or not lines[0].startswith("moesim: error: "):
            findings.append(f"{label}: moesim report exit {r.returncode}, stderr {r.stderr!r}")
    for f in findings:
        print("FINDING", f)
    print(f"report.mutation: {a.mutants} mutants (seed {a.seed}): {refused} refused with one "
          f"line, {accepted} gave a page; {len(findings)} finding(s); {time.time() - t0:.1f} s")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
