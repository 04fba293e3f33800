#!/usr/bin/env python3
"""ctest report.browser: `moesim report` pages load in headless Chromium without errors and
show every figure.

Makes a run directory (scenarios/quickstart.toml for 2 simulated seconds, with a trace window and
a step trace), a sweep CSV (tests/report/tiny_sweep.toml) and a search JSON (its grid), writes
one report of each with `moesim report`, loads each in headless Chromium and asserts, from the
DOM Chromium dumps after the page's load handler ran and from Chromium's console log:
  - no console message at error level and no uncaught exception;
  - the page's own check ran (body data-report-checked="yes") and failed no figure;
  - every expected figure id is present as a <figure> with data-rendered="yes" and a non-empty
    <img src="data:image/png;base64,..."> or <svg> holding drawing elements;
  - the figures expected to say "n/a" do, with no drawing.
A control page with a script error and a broken image must be caught by the same checks (so this
test can fail). Also: `moesim report` on a directory that is no moesim output exits 2.

usage: report_browser_test.py --moesim BIN --work DIR [--chromium BIN]"""

import argparse
import html.parser
import os
import re
import shutil
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

RUN_FIGURES = ["fig-cdf-ttft", "fig-cdf-tpot", "fig-cdf-e2e", "fig-throughput", "fig-memory",
               "fig-timeline", "fig-timeline-zoom", "fig-gpu-time", "fig-wait-series",
               "fig-expert-heatmap", "fig-expert-gpu", "fig-actions", "fig-action-times"]
SWEEP_FIGURES = ["fig-slo-grid", "fig-pareto", "fig-pareto-tpot"]
SEARCH_FIGURES = ["fig-slo-grid", "fig-search-probes", "fig-pareto"]
TABLES = {"run": ["summary-table", "latency-table", "actions-table"],
          "sweep": ["summary-table", "cost-table"], "search": ["summary-table", "cost-table"]}


class Dom(html.parser.HTMLParser):
    """Elements by id with their attributes, and per figure what it contains."""

    def __init__(self):
        super().__init__()
        self.by_id = {}
        self.body = {}
        self.stack = []  # open figure / n/a div ids
        self.content = {}  # id -> {"img": [src...], "svg_children": n, "text": str}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "body":
            self.body = a
        if "id" in a and (tag in ("figure", "table", "div") or a["id"].startswith("fig-")):
            self.by_id.setdefault(a["id"], (tag, a))
            if a["id"].startswith("fig-"):
                self.stack.append((tag, a["id"]))
                self.content[a["id"]] = {"img": [], "svg_draw": 0, "text": ""}
        if self.stack:
            c = self.content[self.stack[-1][1]]
            if tag == "img":
                c["img"].append(a.get("src", ""))
            if tag in ("path", "rect", "use", "line", "polyline", "image"):
                c["svg_draw"] += 1

    def handle_endtag(self, tag):
        if self.stack and tag == self.stack[-1][0]:
            self.stack.pop()

    def handle_data(self, data):
        if self.stack:
            self.content[self.stack[-1][1]]["text"] += data


def load(chromium, path, work):
    """(dumped DOM, console errors) of file `path` after its load handlers ran."""
    prof = os.path.join(work, "chromium-profile")
    cmd = [chromium, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run",
           "--disable-extensions", "--disable-background-networking", f"--user-data-dir={prof}",
           "--enable-logging=stderr", "--v=0", "--virtual-time-budget=10000", "--dump-dom",
           "file://" + os.path.abspath(path)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise SystemExit(f"chromium failed ({r.returncode}) on {path}:\n{r.stderr[-3000:]}")
    # Console messages read "...:INFO:CONSOLE:12] "text", source: file:///... (12)" (uncaught
    # exceptions "Uncaught ..."); the report logs nothing, so every console message fails.
    errors = [line.strip() for line in r.stderr.splitlines()
              if "CONSOLE" in line or "Uncaught" in line]
    return r.stdout, errors


def check_page(chromium, path, work, figures, na_figures=(), tables=()):
    """The failures of page `path` (an empty list when it is as expected)."""
    dom_text, errors = load(chromium, path, work)
    fails = [f"console: {e}" for e in errors]
    d = Dom()
    d.feed(dom_text)
    if d.body.get("data-report-checked") != "yes":
        fails.append("the page's load check did not run (no body data-report-checked)")
    status = d.by_id.get("render-status", ("", {}))[1]
    if status.get("data-failed"):
        fails.append(f"figures the page found not rendered: {status.get('data-failed')}")
    for fid in figures:
        if fid not in d.by_id:
            fails.append(f"{fid}: missing")
            continue
        tag, a = d.by_id[fid]
        c = d.content.get(fid, {})
        if tag != "figure":
            fails.append(f"{fid}: not drawn ({c.get('text', '').strip()[:120]})")
            continue
        if a.get("data-rendered") != "yes":
            fails.append(f"{fid}: data-rendered={a.get('data-rendered')!r}")
        imgs = [s for s in c.get("img", []) if re.match(r"data:image/png;base64,[A-Za-z0-9+/]{200}", s)]
        if a.get("data-kind") == "png" and not imgs:
            fails.append(f"{fid}: no inline PNG")
        if a.get("data-kind") == "svg" and c.get("svg_draw", 0) < 5:
            fails.append(f"{fid}: SVG without drawing elements")
    for fid in na_figures:
        tag, a = d.by_id.get(fid, (None, {}))
        c = d.content.get(fid, {})
        if tag is None or a.get("data-na") != "yes" or "n/a:" not in c.get("text", ""):
            fails.append(f"{fid}: expected an n/a note")
        elif c.get("img") or c.get("svg_draw"):
            fails.append(f"{fid}: n/a figure draws something")
    for tid in tables:
        if tid not in d.by_id:
            fails.append(f"table {tid}: missing")
    if re.search(r'\s(src|href)="(https?:)?//', dom_text):
        fails.append("the page loads something from the network")
    return fails


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, **kw)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit {r.returncode}\n{r.stdout[-2000:]}\n"
                         f"{r.stderr[-2000:]}")
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--moesim", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--chromium", default=shutil.which("chromium") or "chromium")
    a = ap.parse_args()
    if not shutil.which(a.chromium) and not os.path.exists(a.chromium):
        print("chromium not found: install it (scripts/install_deps.sh)", file=sys.stderr)
        return 1
    w = a.work
    shutil.rmtree(w, ignore_errors=True)
    os.makedirs(w)
    fails = []

    # A run with policy actions: the long-context cap rejects the longest prompts.
    rd = os.path.join(w, "run")
    run([a.moesim, "run", "tests/report/report_run.toml", "--out", rd,
         "--record", os.path.join(rd, "steps.jsonl"), "--record-steps", "30"])
    run([a.moesim, "report", rd, "--out", os.path.join(w, "run.html"),
         "--gpu-price-per-hour", "2"])
    fails += [f"run: {f}" for f in check_page(a.chromium, os.path.join(w, "run.html"), w,
                                              RUN_FIGURES, tables=TABLES["run"])]

    # The same run without the step trace and the Chrome trace: those figures say n/a.
    rd2 = os.path.join(w, "run_plain")
    run([a.moesim, "run", "tests/report/report_run.toml", "--out", rd2, "--trace-window", "0:0"])
    os.remove(os.path.join(rd2, "trace.json")) if os.path.exists(
        os.path.join(rd2, "trace.json")) else None
    run([a.moesim, "report", rd2, "-o", os.path.join(w, "run_plain.html")])
    fails += [f"run_plain: {f}" for f in check_page(
        a.chromium, os.path.join(w, "run_plain.html"), w,
        ["fig-cdf-ttft", "fig-throughput", "fig-memory", "fig-wait-series", "fig-actions"],
        na_figures=["fig-timeline", "fig-gpu-time", "fig-expert-heatmap", "fig-expert-gpu"])]

    sw = os.path.join(w, "sweep.csv")
    run([a.moesim, "sweep", "tests/report/tiny_sweep.toml", "--threads", "1", "--out", sw])
    run([a.moesim, "report", sw, "--out", os.path.join(w, "sweep.html"),
         "--gpu-price-per-hour", "2.5"])
    fails += [f"sweep: {f}" for f in check_page(a.chromium, os.path.join(w, "sweep.html"), w,
                                                SWEEP_FIGURES, tables=TABLES["sweep"])]

    se = os.path.join(w, "search")
    os.makedirs(se)
    r = run([a.moesim, "search", "sweeps/scenarios/tiny_chat.toml", "--grid",
             "tests/report/tiny_sweep.toml", "--slo", "ttft_p99_ms=200,tpot_p99_ms=20",
             "--threads", "1", "--tolerance", "0.3", "--max-doublings", "3", "--json"])
    with open(os.path.join(se, "search.json"), "w") as f:
        f.write(r.stdout)
    run([a.moesim, "report", se, "-o", os.path.join(w, "search.html")])
    fails += [f"search: {f}" for f in check_page(a.chromium, os.path.join(w, "search.html"), w,
                                                 SEARCH_FIGURES, tables=TABLES["search"])]

    # Control: a page with a script error and an undecodable image must fail the checks.
    ctl = os.path.join(w, "control.html")
    with open(os.path.join(w, "run.html")) as f:
        page = f.read()
    page = page.replace('src="data:image/png;base64,', 'src="data:image/png;base64,AAAA', 1)
    page = page.replace("</body>", "<script>undefined_function_of_the_control();</script></body>")
    with open(ctl, "w") as f:
        f.write(page)
    ctl_fails = check_page(a.chromium, ctl, w, RUN_FIGURES)
    if not any("console" in f for f in ctl_fails):
        fails.append("control: the script error was not caught")
    if not any("not rendered" in f or "data-rendered" in f for f in ctl_fails):
        fails.append("control: the broken image was not caught")

    # Bad input: exit 2 with a message.
    empty = os.path.join(w, "empty")
    os.makedirs(empty)
    r = subprocess.run([a.moesim, "report", empty, "-o", os.path.join(w, "x.html")],
                       capture_output=True, text=True)
    if r.returncode != 2 or "not a moesim output" not in r.stderr:
        fails.append(f"bad input: exit {r.returncode}, stderr {r.stderr!r}")

    for f in fails:
        print("FAIL", f)
    print(f"report.browser: {len(fails)} failure(s); pages under {w}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
