"""The Python module fails like the command line (docs/python.md, "Errors"): every bad argument or
input raises moesim.ConfigError / moesim.UsageError naming the file or the argument and the
reason, integers beyond 64 bits and non-finite floats are refused before they reach C++, and
every command of the command line (apps/moesim/main.cc) is a function of the module.

Run by ctest python.moesim with test_moesim.py (tests/python/CMakeLists.txt).
"""

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

import moesim

REPO = Path(os.environ.get("MOESIM_REPO", Path(__file__).resolve().parents[2]))
MOESIM = os.environ.get("MOESIM", str(REPO / "build" / "apps" / "moesim"))
TINY = REPO / "tests/data/study/tiny.toml"
TOPO = REPO / "topologies/h200-node.toml"
CROSSOVER = REPO / "scenarios/teaching-crossover.toml"
AZURE = REPO / "data/traces/AzureLLMInferenceTrace_conv.csv"
STEPS = REPO / "tests/data/engine/tiny_steps.jsonl"


def cli(*args):
    return subprocess.run([MOESIM, *map(str, args)], capture_output=True, text=True, cwd=REPO)


def usage_error(fn, *words):
    """fn() raises UsageError (a ConfigError) whose message has every word; returns it."""
    with pytest.raises(moesim.UsageError) as e:
        fn()
    assert isinstance(e.value, moesim.ConfigError) and isinstance(e.value, ValueError)
    for w in words:
        assert w in str(e.value), (w, str(e.value))
    assert e.value.reason and "\n" not in str(e.value)
    return e.value


def test_every_command_of_the_command_line_is_a_function():
    main = (REPO / "apps/moesim/main.cc").read_text()
    names = re.findall(r'^\s*\{"([a-z-]+)", "', main, re.M)
    assert len(names) >= 15 and "engine" in names and "report" in names
    assert sorted(moesim.COMMANDS) == sorted(names)
    for name, function in moesim.COMMANDS.items():
        assert callable(getattr(moesim, function)), name


def test_engine_is_moesim_engine(tmp_path):
    assert moesim.engine("--version") == cli("engine", "--version").stdout
    assert moesim.command("engine", "--version") == cli("engine", "--version").stdout
    out = tmp_path / "meas.jsonl"
    text = moesim.engine("replay", STEPS, "--out", out, "--max-steps", 1, "--repeats", 1,
                         "--warmup", 0)
    assert "op records" in text and out.stat().st_size > 0
    usage_error(lambda: moesim.engine("replay", STEPS, "--bogus"), "unknown option --bogus")
    with pytest.raises(moesim.ConfigError) as e:
        moesim.engine("replay", tmp_path / "none.jsonl", "--out", out)
    assert e.value.file == str(tmp_path / "none.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"record": "header"}\n')
    with pytest.raises(moesim.ConfigError) as e:
        moesim.engine("replay", bad, "--out", out)
    assert e.value.file == str(bad) and e.value.line == 1 and e.value.reason
    usage_error(lambda: moesim.engine("replay", 2**64), "args[1]", "64-bit")


def test_engine_not_found_names_what_it_tried(monkeypatch):
    monkeypatch.setenv("MOESIM_ENGINE", "/nonexistent/moesim-engine")
    usage_error(lambda: moesim.engine("--version"), "cannot run moesim-engine",
                "/nonexistent/moesim-engine")


def test_trace_fit_is_the_cli_json():
    got = moesim.trace_fit(AZURE, max_requests=200, seed=3)
    ref = json.loads(cli("trace-fit", AZURE, "--max-requests", 200, "--seed", 3, "--json").stdout)
    assert got == ref
    assert moesim.command("trace-fit", AZURE, "--max-requests", "200", "--seed", "3",
                          "--json") == ref
    usage_error(lambda: moesim.trace_fit(AZURE, seed=-1), "--seed must be >= 0")
    usage_error(lambda: moesim.trace_fit(AZURE, end_s=float("nan")), "end_s", "not a finite")
    with pytest.raises(moesim.ConfigError) as e:
        moesim.trace_fit(REPO / "nope.csv")
    assert e.value.file == str(REPO / "nope.csv")


def test_report_is_the_cli_report(tmp_path):
    run = tmp_path / "run"
    moesim.run(TINY, out_dir=run, steps=False)
    got = moesim.report(run, tmp_path / "py.html")
    assert got["kind"] == "run" and got["bytes"] == (tmp_path / "py.html").stat().st_size
    r = cli("report", run, "--out", tmp_path / "cli.html")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "py.html").read_bytes() == (tmp_path / "cli.html").read_bytes()


def test_report_bad_input_names_file_row_and_column(tmp_path):
    run = tmp_path / "run"
    moesim.run(TINY, out_dir=run, steps=False)
    requests = run / "requests.csv"
    lines = requests.read_text().split("\n")
    header = lines[0].split(",")
    cells = lines[2].split(",")
    cells[header.index("ttft_ms")] = "-2.5"
    lines[2] = ",".join(cells)
    requests.write_text("\n".join(lines))
    with pytest.raises(moesim.ConfigError) as e:
        moesim.report(run, tmp_path / "r.html")
    assert (e.value.file, e.value.line, e.value.key_path) == (str(requests), 3, "ttft_ms")
    assert e.value.reason == "must be >= 0, got -2.5"
    r = cli("report", run, "--out", tmp_path / "cli.html")
    assert r.returncode == 2 and r.stderr == f"moesim: error: {e.value}\n"
    assert not (tmp_path / "r.html").exists()
    with pytest.raises(moesim.ConfigError) as e:
        moesim.report(run, tmp_path / "missing_dir" / "r.html")
    assert "does not exist" in e.value.reason
    usage_error(lambda: moesim.report(run, tmp_path / "r.html", gpu_price_per_hour=float("inf")),
                "gpu_price_per_hour", "not a finite number")


def test_integers_beyond_64_bits_are_refused_before_cpp():
    big = 2**64
    usage_error(lambda: moesim.run(TINY, seed=big), "seed", "64-bit integer range")
    usage_error(lambda: moesim.run(TINY, seed=2**63), "seed", "64-bit integer range")
    usage_error(lambda: moesim.run(TINY, record_steps=-(2**63) - 1), "record_steps")
    usage_error(lambda: moesim.model_show(REPO / "models/tiny.toml", context=big), "context")
    usage_error(lambda: moesim.collective(TOPO, ep=big, tokens_per_gpu=1, hidden=1, top_k=1),
                "ep", "64-bit")
    usage_error(lambda: moesim.layers(CROSSOVER, batches=[4, big]), "batches[1]", "64-bit")
    usage_error(lambda: moesim.search(TINY, "ttft_p99_ms=100", seed=big), "seed")
    usage_error(lambda: moesim.compare(TINY, TINY, replications=big), "replications")
    usage_error(lambda: moesim.sweep(REPO / "tests/data/study/grid.toml", threads=big),
                "threads")
    usage_error(lambda: moesim.calibrate(REPO / "tests/data/calibration/meas_small.jsonl",
                                         out="x.toml", max_segments=big), "max_segments")
    usage_error(lambda: moesim.run(TINY, {"scheduler.max_seqs": 2**70}),
                "overrides['scheduler.max_seqs']", "64-bit integer range")
    usage_error(lambda: moesim.command("run", TINY, "--seed", str(big)), "--seed", "64-bit")


def test_non_finite_numbers_are_refused_before_cpp():
    nan, inf = float("nan"), float("inf")
    usage_error(lambda: moesim.run(TINY, duration_s=nan), "duration_s", "not a finite number")
    usage_error(lambda: moesim.run(TINY, trace_window=(0, inf)), "trace_window[1]")
    # NaN passed through to the fit changed it ("no op kind had enough measured records").
    usage_error(lambda: moesim.calibrate(REPO / "tests/data/calibration/meas_bench.jsonl",
                                         out="x.toml", max_spread=nan), "max_spread", "finite")
    usage_error(lambda: moesim.sweep(REPO / "tests/data/study/grid.toml", min_attainment=inf),
                "min_attainment")
    usage_error(lambda: moesim.search(TINY, {"ttft_p99_ms": nan}), "slo['ttft_p99_ms']")
    usage_error(lambda: moesim.prune(TINY, fractions=[0.5, nan]), "fractions[1]")
    usage_error(lambda: moesim.run(TINY, {"run.duration_s": inf}), "run.duration_s")
    usage_error(lambda: moesim.command("compare", TINY, TINY, "--confidence", "nan"),
                "--confidence", "finite")


def test_wrong_types_name_the_argument():
    usage_error(lambda: moesim.run(TINY, seed="3"), "seed", "want an integer", "str")
    usage_error(lambda: moesim.run(TINY, seed=1.5), "seed", "want an integer")
    usage_error(lambda: moesim.run(TINY, seed=True), "seed", "want an integer")
    usage_error(lambda: moesim.run(None), "scenario", "missing")
    usage_error(lambda: moesim.run(123), "scenario", "file path")
    usage_error(lambda: moesim.run(TINY, 5), "overrides", "want a string or a list")
    usage_error(lambda: moesim.run(TINY, trace_window=(0, 1, 2)), "trace_window",
                "(start_s, end_s)")
    usage_error(lambda: moesim.run(TINY, steps="yes"), "steps", "True or False")
    # A string iterated as a list gave "could not convert string to float: '.'".
    usage_error(lambda: moesim.prune(TINY, fractions="0.5"), "fractions", "list of numbers")
    usage_error(lambda: moesim.layers(CROSSOVER, batches="4,16"), "batches", "list of integers")
    usage_error(lambda: moesim.collective(TOPO, ep="8", tokens_per_gpu=1, hidden=1, top_k=1),
                "ep", "want an integer")
    usage_error(lambda: moesim.calibrate(None, out="x.toml"), "measurements", "missing")
    usage_error(lambda: moesim.model_show(REPO / "models/tiny.toml", context=8.0), "context")
    usage_error(lambda: moesim.command("bogus"), "unknown command 'bogus'", "engine")


def test_scenario_dict_values_beyond_toml_are_config_errors():
    for value, reason in ((2**70, "beyond the 64-bit integer range"),
                          (float("nan"), "not a finite number")):
        with pytest.raises(moesim.ConfigError) as e:
            moesim.run({"name": "x", "run": {"seed": value}}, base_dir=REPO)
        assert e.value.key_path == "run.seed" and reason in e.value.reason
        assert e.value.file.endswith("<scenario dict>")


def test_steps_table_names_the_file_and_line(tmp_path):
    bad = tmp_path / "steps.jsonl"
    bad.write_text('{"record": "header"}\n{"record": "step", "step": 0\n')
    with pytest.raises(moesim.ConfigError) as e:
        moesim.steps_table(bad)
    assert (e.value.file, e.value.line) == (str(bad), 2) and "not JSON" in e.value.reason
    bad.write_text('{"record": "step", "step": 0}\n')
    with pytest.raises(moesim.ConfigError) as e:
        moesim.steps_table(bad)
    assert e.value.line == 1 and "not a step record" in e.value.reason
    with pytest.raises(moesim.ConfigError) as e:
        moesim.steps_table(tmp_path / "none.jsonl")
    assert e.value.file == str(tmp_path / "none.jsonl") and "No such file" in e.value.reason
