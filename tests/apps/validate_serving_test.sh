#!/bin/bash
# `moesim validate --serving` end to end, with the simulator standing in for the engine
# (docs/calibration.md, "Serving validation"): the calibration chat workload, shortened, priced
# by the shipped CPU profile (capacity about 19 requests/s), is exported at 8 and 30 requests/s (`run --export-requests`, long enough to
# drain); each run's requests.csv, with a serve summary beside it, is given twice as a serve run.
# The re-simulation of each trace with the profile must then reproduce the run byte for byte
# (requests.csv identical), so every metric's error is 0 and within the (zero) spread; a run
# naming another scenario and a summary whose counts disagree with its rows are bad input (exit 2).
# usage: validate_serving_test.sh MOESIM SOURCE_DIR WORK_DIR
set -u
moesim=$1
src=$2
work=$3
rm -rf "$work"
mkdir -p "$work"
fail() {
  echo "FAIL: $*"
  exit 1
}
profile="$src/profiles/cpu-amd-epyc.toml"

sed -e "s|\"\.\./\.\./|\"$src/|" -e 's/^duration_s = 0.2$/duration_s = 1/' \
  "$src/scenarios/calibration/tiny-cpu-chat.toml" >"$work/chat.toml"
grep -q '^duration_s = 1$' "$work/chat.toml" || fail "could not shorten the scenario"

# A serve run made of a simulated run: its requests.csv and a summary in the serve schema.
fake_serve() {  # SIM_DIR TRACE OUT_DIR [SCENARIO_NAME]
  mkdir -p "$3"
  cp "$1/requests.csv" "$3/requests.csv"
  python3 - "$1/summary.json" "$2" "${4:-}" >"$3/summary.json" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
r = s["requests"]
print(json.dumps({"schema": "moesim.serve_summary.v1", "trace": sys.argv[2],
                  "scenario": sys.argv[3] or s["scenario"], "wall_s": 1.0, "steps": 1,
                  "requests": {k: r[k] for k in ("arrived", "completed", "rejected",
                                                 "in_flight")}}))
EOF
}

runs=()
for rate in 8 30; do
  "$moesim" run "$work/chat.toml" --duration 20 --set workload.arrival.rate_per_s=$rate \
    --set cost.model=calibrated --set "cost.profile=$profile" --out "$work/sim-$rate" \
    --export-requests "$work/trace-$rate.jsonl" >/dev/null || fail "export at $rate failed"
  grep -q '"in_flight": 0' "$work/sim-$rate/summary.json" || fail "the run at $rate did not drain"
  for k in 0 1; do
    fake_serve "$work/sim-$rate" "$work/trace-$rate.jsonl" "$work/serve-$rate-$k"
    runs+=("$work/serve-$rate-$k")
  done
done

"$moesim" validate "$work/chat.toml" --profile "$profile" --out "$work/v" --serving "${runs[@]}" \
  >"$work/report.txt" || fail "validate --serving failed: $(tail -3 "$work/report.txt")"
for rate in 8 30; do
  resim=$(ls -d "$work"/v/resim/*-trace-$rate)
  cmp -s "$resim/requests.csv" "$work/sim-$rate/requests.csv" ||
    fail "the re-simulation of trace-$rate differs from the run: $(diff "$resim/requests.csv" \
      "$work/sim-$rate/requests.csv" | head -4)"
done
python3 - "$work/v/report.json" <<'EOF' || fail "report.json"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["schema"] == "moesim.serving_validation.v1"
assert len(r["points"]) == 2, len(r["points"])
rates = [p["offered_rate_per_s"] for p in r["points"]]
assert rates[0] < rates[1] and 2 < rates[0] < 16 < rates[1] < 60, rates
for p in r["points"]:
    assert len(p["engine_runs"]) == 2
    for name, m in p["metrics"].items():
        assert m["error_rel"] in (0, None), (name, m)
        assert m["within_spread"], (name, m)
    assert p["metrics"]["completed"]["simulated"] == p["arrived"]
EOF
grep -q "^Knee (highest offered rate meeting the SLOs): measured" "$work/report.txt" ||
  fail "no knee line in the report"
head -1 "$work/v/points.csv" | grep -q '^trace,offered_rate_per_s,side,metric,' ||
  fail "points.csv header"

# Bad input: a run of another scenario; counts that disagree with the rows.
fake_serve "$work/sim-8" "$work/trace-8.jsonl" "$work/other" "another"
err=$("$moesim" validate "$work/chat.toml" --profile "$profile" --out "$work/v2" \
  --serving "$work/other" 2>&1 >/dev/null)
rc=$?
[ $rc -eq 2 ] || fail "another scenario: expected exit 2, got $rc: $err"
[[ $err == *"$work/other/summary.json: scenario: 'another' differs"* ]] || fail "$err"
sed -i 's/"completed": /"completed": 1/' "$work/other/summary.json"
err=$("$moesim" validate "$work/chat.toml" --profile "$profile" --out "$work/v2" \
  --serving "$work/other" 2>&1 >/dev/null)
rc=$?
[ $rc -eq 2 ] || fail "bad counts: expected exit 2, got $rc: $err"
[[ $err == *"$work/other/summary.json: requests.completed: "*", but "*"requests.csv has"* ]] ||
  fail "$err"
echo "validate --serving: 2 load points x 2 runs, re-simulation identical, errors 0"
