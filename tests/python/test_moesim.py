"""The Python module (python/moesim, docs/python.md) against the `moesim` executable: the same
digests, tables and JSON documents, and bad input raised as moesim.ConfigError.

Run by ctest (tests/python/CMakeLists.txt) with PYTHONPATH=<build>/python, MOESIM=<the moesim
binary> and the repository root as the working directory.
"""

import json
import os
import subprocess
import threading
import tomllib
from pathlib import Path

import pandas as pd
import pytest

import moesim

REPO = Path(os.environ.get("MOESIM_REPO", Path(__file__).resolve().parents[2]))
MOESIM = os.environ.get("MOESIM", str(REPO / "build" / "apps" / "moesim"))
TINY = REPO / "tests/data/study/tiny.toml"
GRID = REPO / "tests/data/study/grid.toml"
QUICKSTART = REPO / "scenarios/quickstart.toml"


def cli(*args, check=True):
    r = subprocess.run([MOESIM, *map(str, args)], capture_output=True, text=True, cwd=REPO)
    if check and r.returncode != 0:
        raise AssertionError(f"moesim {args} exited {r.returncode}: {r.stderr}")
    return r


def cli_json(*args):
    return json.loads(cli(*args, "--json").stdout)


def golden_digest(path, fidelity="exact"):
    """The checked-in digest of a shipped scenario (tests/golden/digests.txt)."""
    for line in (REPO / "tests/golden/digests.txt").read_text().splitlines():
        parts = line.split()
        if parts and parts[0] == path:
            return parts[3] if fidelity == "exact" else parts[4]
    raise KeyError(path)


def without_wall(summary):
    return {k: v for k, v in summary.items() if k != "wall_s"}


def test_run_matches_the_cli_and_the_golden_digest(tmp_path):
    r = moesim.run(QUICKSTART)
    assert r.event_digest == golden_digest("scenarios/quickstart.toml")
    out = tmp_path / "cli"
    ref = json.loads(cli("run", QUICKSTART, "--json", "--out", out).stdout)
    assert without_wall(r.summary) == without_wall(ref)
    requests = pd.read_csv(out / "requests.csv")
    assert list(r.requests.columns) == list(requests.columns)
    pd.testing.assert_frame_equal(r.requests, requests)
    # The summary counts the measured requests; those of the warm-up are in the table too.
    assert len(r.requests) == (r.summary["requests"]["arrived"]
                               + r.summary["measurement"]["warmup_requests"])
    assert r.exit_code == 0 and r.conservation_ok
    assert r.out_dir is None


def test_run_fast_fidelity_matches_its_golden_digest():
    r = moesim.run(QUICKSTART, fidelity="fast")
    assert r.event_digest == golden_digest("scenarios/quickstart.toml", "fast")
    assert r.summary["fidelity"] == "fast"
    assert r.steps is None  # the fast fidelity records no step trace
    # steps.csv has every executed step on either fidelity.
    assert len(r.step_series) == r.summary["counters"]["steps"] > 0


def test_steps_table_matches_the_recorded_step_trace(tmp_path):
    r = moesim.run(TINY, out_dir=tmp_path / "run")
    trace = tmp_path / "ref.jsonl"
    cli("run", TINY, "--record", trace)
    steps = [json.loads(l) for l in trace.read_text().splitlines()]
    steps = [s for s in steps if s["record"] == "step"]
    assert len(r.steps) == len(steps) > 0
    assert list(r.steps.step_ns) == [s["sim"]["step_ns"] for s in steps]
    assert list(r.steps.new_tokens) == [sum(q["new_tokens"] for q in s["sequences"]) for s in steps]
    assert (r.steps.num_prefill + r.steps.num_decode == r.steps.num_sequences).all()
    # out_dir keeps the files of `moesim run --out`
    for name in ("summary.json", "requests.csv", "steps.jsonl", "resolved/scenario.toml"):
        assert (tmp_path / "run" / name).is_file(), name
    assert r.out_dir == tmp_path / "run"


def test_seed_and_duration_are_the_cli_options():
    r = moesim.run(TINY, seed=5, duration_s=1.0)
    ref = cli_json("run", TINY, "--seed", 5, "--duration", 1.0)
    assert r.event_digest == ref["event_digest"]
    assert r.event_digest != moesim.run(TINY).event_digest


def test_dict_scenario_is_the_file():
    text = TINY.read_text()
    scenario = tomllib.loads(text)
    r = moesim.run(scenario, base_dir=TINY.parent)
    assert r.event_digest == moesim.run(TINY).event_digest


def test_overrides_are_the_cli_set_option(tmp_path):
    over = {"deployment.replicas": 2, "scheduler.max_seqs": 8}
    r = moesim.run(TINY, over, out_dir=tmp_path / "py")
    ref = cli_json("run", TINY, "--set", "deployment.replicas=2", "--set", "scheduler.max_seqs=8",
                   "--out", tmp_path / "cli")
    assert r.event_digest == ref["event_digest"]
    assert r.event_digest != moesim.run(TINY).event_digest
    assert set(r.requests.replica) == {0, 1}
    # The list form, and the resolved scenario holds the overrides.
    assert moesim.run(TINY, ["deployment.replicas=2", "scheduler.max_seqs=8"]).event_digest == \
        r.event_digest
    resolved = tomllib.loads((tmp_path / "py/resolved/scenario.toml").read_text())
    assert resolved["deployment"]["replicas"] == 2 and resolved["scheduler"]["max_seqs"] == 8
    # Overrides of a dict scenario.
    d = moesim.run(tomllib.loads(TINY.read_text()), over, base_dir=TINY.parent)
    assert d.event_digest == r.event_digest


def test_runs_in_threads_are_deterministic():
    seeds = [1, 2, 3, 4]
    serial = {s: moesim.run(TINY, seed=s, steps=False).event_digest for s in seeds}
    parallel = {}

    def work(s):
        parallel[s] = moesim.run(TINY, seed=s, steps=False).event_digest

    threads = [threading.Thread(target=work, args=(s,)) for s in seeds]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert parallel == serial


def test_unknown_key_in_a_dict_is_a_config_error():
    scenario = tomllib.loads(TINY.read_text())
    scenario["scheduler"]["max_seqz"] = 3
    with pytest.raises(moesim.ConfigError) as e:
        moesim.run(scenario, base_dir=TINY.parent)
    assert isinstance(e.value, ValueError)
    assert e.value.key_path == "scheduler.max_seqz"
    assert e.value.file.endswith("<scenario dict>")
    assert "unknown key" in e.value.reason


def test_bad_values_name_file_key_and_reason(tmp_path):
    with pytest.raises(moesim.ConfigError) as e:
        moesim.run(TINY, {"scheduler.max_seqs": -1})
    assert e.value.file == str(TINY) and e.value.key_path == "scheduler.max_seqs"
    assert "with overrides scheduler.max_seqs=-1" in str(e.value)
    # The same message as the command line's.
    ref = cli("run", TINY, "--set", "scheduler.max_seqs=-1", check=False)
    assert ref.returncode == 2 and str(e.value) in ref.stderr
    with pytest.raises(moesim.ConfigError) as e:
        moesim.run(tmp_path / "missing.toml")
    assert e.value.file == str(tmp_path / "missing.toml")
    with pytest.raises(moesim.ConfigError) as e:
        moesim.run({"name": "x", "model": None})
    assert e.value.key_path == "model" and "NoneType" in e.value.reason
    with pytest.raises(moesim.ConfigError) as e:
        moesim.run(TINY, ["no_equals_sign"])
    assert "KEY.PATH=VALUE" in e.value.reason


def test_bad_arguments_are_usage_errors():
    with pytest.raises(moesim.UsageError) as e:
        moesim.run(TINY, fidelity="bogus")
    assert "--fidelity" in e.value.reason and isinstance(e.value, moesim.ConfigError)
    with pytest.raises(moesim.UsageError):
        moesim.model_show(REPO / "models/tiny.toml", context=0)
    with pytest.raises(moesim.ConfigError):
        moesim.topo_show(REPO / "models/tiny.toml")


def test_model_topo_collective_are_the_cli_json():
    card = REPO / "models/deepseek-v3.toml"
    assert moesim.model_show(card) == cli_json("model", "show", card)
    assert moesim.model_show(card, context=8192) == cli_json("model", "show", card, "--context",
                                                             8192)
    topo = REPO / "topologies/h200-node.toml"
    assert moesim.topo_show(topo) == cli_json("topo", "show", topo)
    c = moesim.collective(topo, ep=8, tokens_per_gpu=128, hidden=7168, top_k=8, skew="zipf:1.2")
    assert c == cli_json("collective", "--topology", topo, "--ep", 8, "--tokens-per-gpu", 128,
                         "--hidden", 7168, "--top-k", 8, "--skew", "zipf:1.2")
    assert c["dispatch"] and c["skew"] == "zipf:1.2"


def test_compare_is_the_cli_json():
    b = REPO / "tests/data/study/tiny.toml"
    got = moesim.compare(TINY, b, resamples=200, threads=2)
    ref = cli_json("compare", TINY, b, "--resamples", 200, "--threads", 2)
    assert got == ref
    assert got["digests"]["a"] == got["digests"]["b"]


def test_compare_sets_and_drops_like_the_cli():
    b = REPO / "tests/data/study/tiny.toml"
    got = moesim.compare(b, b, resamples=100, threads=2, drop_a="slo",
                         set_b={"scheduler.max_seqs": 1})
    ref = cli_json("compare", b, b, "--resamples", 100, "--threads", 2, "--drop-a", "slo",
                   "--set-b", "scheduler.max_seqs=1")
    assert got == ref
    assert got["changes"] == {"a": "without slo", "b": "scheduler.max_seqs=1"}
    assert got["digests"]["a"] != got["digests"]["b"]


def test_sweep_is_the_cli_csv():
    df = moesim.sweep(GRID, threads=2)
    ref = pd.read_csv(__import__("io").StringIO(cli("sweep", GRID, "--threads", 2).stdout))
    pd.testing.assert_frame_equal(df, ref)
    assert len(df) == 8 and (df.status == "ok").all()


def test_sweep_planner_options(tmp_path):
    df = moesim.sweep(GRID, threads=2, slo={"ttft_p99_ms": 500}, gpu_price_per_hour=2.5,
                      plan=tmp_path / "plan.json")
    assert (df.gpu_price_per_hour == 2.5).all() and (df.gpu_price_source == "flag").all()
    assert (df.feasible_limits == "ttft_p99_ms<=500, attainment>=0.99").all()
    per_gpu = df.output_tokens_per_s / df.num_gpus
    assert ((df.output_tokens_per_s_per_gpu - per_gpu).abs() <= 1e-9 * per_gpu).all()
    plan = __import__("json").loads((tmp_path / "plan.json").read_text())
    assert len(plan["configs"]) == 4 and plan["cost_axis"] == "usd_per_m_output_tokens"


def test_search_is_the_cli_json():
    slo = {"ttft_p99_ms": 500, "tpot_p99_ms": 50}
    got = moesim.search(TINY, slo, max_doublings=2, tolerance=0.5, threads=2)
    ref = cli_json("search", TINY, "--slo", "ttft_p99_ms=500,tpot_p99_ms=50", "--max-doublings",
                   2, "--tolerance", 0.5, "--threads", 2)
    table = got.pop("table")
    assert got == ref
    assert list(table.config_idx) == [c["config_idx"] for c in ref["configs"]]
    assert "max_rate_per_s" in table.columns
    assert "output_tokens_per_s_per_gpu" in table.columns and "diagnosis" not in table.columns
    assert all(c["diagnosis"]["verdict"] == "" for c in got["configs"])


def test_nothing_leaks_onto_stdout(capfd):
    moesim.model_show(REPO / "models/tiny.toml")
    moesim.run(TINY, steps=False)
    out, _ = capfd.readouterr()
    assert out == ""


def test_layers_and_prune_are_the_cli_json():
    crossover = REPO / "scenarios/teaching-crossover.toml"
    got = moesim.layers(crossover, batches=[4, 16], timeline=True)
    assert got == cli_json("layers", crossover, "--batches", "4,16", "--timeline")
    assert len(got["rows"]) == 4 and got["timeline"]
    assert moesim.prune(TINY, fractions=[0.5]) == cli_json("prune", TINY, "--fractions", "0.5")


def test_command_reads_the_cli_arguments_onto_the_typed_functions():
    crossover = REPO / "scenarios/teaching-crossover.toml"
    assert moesim.command("layers", crossover, "--batches", "4", "--json") == \
        cli_json("layers", crossover, "--batches", 4)
    card = REPO / "models/tiny.toml"
    assert moesim.command("model", "show", card) == cli("model", "show", card).stdout
    assert moesim.command("model", "show", card, "--context=64", "--json") == \
        cli_json("model", "show", card, "--context", 64)
    topo = REPO / "topologies/h200-node.toml"
    assert moesim.command("topo", "show", topo) == cli("topo", "show", topo).stdout
    with pytest.raises(moesim.UsageError) as e:
        moesim.command("layers", crossover, "--batchez", "4")
    assert "unknown option --batchez" in e.value.reason


def test_the_text_of_a_command_is_the_cli_s():
    text = moesim._moesim.compare(str(TINY), str(TINY), resamples=50, threads=2, text=True)
    assert text == cli("compare", TINY, TINY, "--resamples", 50, "--threads", 2).stdout


def test_errors_carry_file_key_and_reason():
    with pytest.raises(moesim.ConfigError) as e:
        moesim.run(TINY, {"scheduler.max_seqz": 3})
    assert e.value.file == str(TINY) and e.value.key == e.value.key_path == "scheduler.max_seqz"
    with pytest.raises(moesim.UsageError) as e:
        moesim.search(TINY, "ttft_p99_ms=150", max_doublings=40)
    assert e.value.reason == "--max-doublings must be in 0..30"
    with pytest.raises(moesim.OutputError) as e:
        moesim.sweep(GRID, threads=2, out="/dev/full")
    assert "cannot write /dev/full" in e.value.reason


def test_sweep_plan_and_merge_are_the_cli_s(tmp_path):
    shards = []
    for k in (1, 2):
        out = tmp_path / f"s{k}.csv"
        moesim.sweep(GRID, threads=2, shard=f"{k}/2", out=out)
        shards.append(out)
    moesim.sweep_merge(tmp_path / "all.csv", *shards)
    whole = cli("sweep", GRID, "--threads", 2).stdout
    assert (tmp_path / "all.csv").read_text() == whole
    assert moesim.sweep_plan(tmp_path / "all.csv") == \
        cli("sweep", "plan", tmp_path / "all.csv").stdout


def test_search_resumes_from_its_journal(tmp_path):
    journal = tmp_path / "search.journal"
    slo = {"ttft_p99_ms": 150}
    first = moesim.search(TINY, slo, grid=GRID, max_doublings=2, tolerance=0.3, threads=2,
                          journal=journal)
    again = moesim.search(TINY, slo, grid=GRID, max_doublings=2, tolerance=0.3, threads=2,
                          journal=journal, resume=True)
    first.pop("table"), again.pop("table")
    assert first == again


def test_calibration_commands_are_the_cli_s(tmp_path):
    profile = REPO / "profiles/h800-public.toml"
    topologies = REPO / "topologies"
    got = moesim.derive_profile(profile, source_topology=topologies / "h800-128x8.toml",
                                topology=topologies / "h200-node.toml", out=tmp_path / "py.toml")
    cli("derive-profile", profile, "--source-topology", topologies / "h800-128x8.toml",
        "--topology", topologies / "h200-node.toml", "--out", tmp_path / "cli.toml")
    assert (tmp_path / "py.toml").read_text() == (tmp_path / "cli.toml").read_text()
    assert got["name"] == "h800-public-derived-h200-sxm" and "HBM bandwidth 1.433" in \
        got["derivation"]
    with pytest.raises(moesim.UsageError) as e:
        moesim.calibrate(REPO / "tests/data/calibration/meas_small.jsonl",
                         out=tmp_path / "never.toml")
    assert "no op kind" in e.value.reason
