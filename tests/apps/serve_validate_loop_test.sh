#!/bin/bash
# The serving loop end to end with the real engine (docs/serving_validation.md): a short trace of
# scenarios/serving/tiny-cpu-ep2.toml (about 1 s of arrivals at 20 requests/s) is exported,
# served by `moesim-engine serve` on two CPU rank threads, and validated with
# `moesim validate --serving`. Checks that no machine load can break, since load only slows the
# engine down: every request completes on both sides, the simulated output tokens/s is not more
# than 10% below the engine's, and the engine's TTFT p50 is not below half the simulated one
# (the measured gaps are the other way, docs/serving_validation.md).
# usage: serve_validate_loop_test.sh MOESIM MOESIM_ENGINE SOURCE_DIR WORK_DIR
set -u
moesim=$1
engine=$2
src=$3
work=$4
rm -rf "$work"
mkdir -p "$work"
fail() {
  echo "FAIL: $*"
  exit 1
}
scenario="$src/scenarios/serving/tiny-cpu-ep2.toml"
"$moesim" run "$scenario" --set workload.arrival.rate_per_s=20 --set workload.duration_s=1 \
  --export-requests "$work/trace.jsonl" >/dev/null || fail "export failed"
"$engine" serve "$work/trace.jsonl" --out "$work/serve" >"$work/serve.txt" ||
  fail "serve failed: $(cat "$work/serve.txt")"
"$moesim" validate "$scenario" --profile "$src/profiles/cpu-amd-epyc.toml" --out "$work/val" \
  --serving "$work/serve" >"$work/validate.txt" || fail "validate failed: $(tail -3 "$work/validate.txt")"
python3 - "$work/val/report.json" <<'PY' || exit 1
import json, sys
r = json.load(open(sys.argv[1]))
(p,) = r["points"]
m = p["metrics"]
def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)
if m["completed"]["engine_mean"] != m["completed"]["simulated"] or p["arrived"] != m["completed"]["simulated"]:
    fail("completed: engine %s, simulated %s, arrived %s" % (
        m["completed"]["engine_mean"], m["completed"]["simulated"], p["arrived"]))
if m["output_tokens_per_s"]["error_rel"] < -0.10:
    fail("output tokens/s error %.3f" % m["output_tokens_per_s"]["error_rel"])
ttft = m["ttft_p50_ms"]
if ttft["engine_mean"] < 0.5 * ttft["simulated"]:
    fail("engine TTFT p50 %.2f ms below half the simulated %.2f ms" % (
        ttft["engine_mean"], ttft["simulated"]))
print("ok: %d requests; TTFT p50 engine %.2f ms, simulated %.2f ms" % (
    p["arrived"], ttft["engine_mean"], ttft["simulated"]))
PY
