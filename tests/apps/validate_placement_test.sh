#!/usr/bin/env bash
# `moesim validate` of a run whose placement changes (EPLB): record the tiny EPLB scenario,
# replay its first steps on the CPU engine, validate. The trace must hold a per-layer placement
# record inside the replayed steps, and the re-simulation must reproduce the recorded routing under the
# placement in force at every step (num_routing_mismatches == 0). Then the same with the simple
# overlap (microbatch_overlap = true) and with the two micro-batch schedules (overlap =
# "two_microbatch" / "decode_pipeline", validated against the scenario without overlap: the
# trace's schedule is used), whose step composition must match the StepModel's.
# Usage: validate_placement_test.sh MOESIM MOESIM_ENGINE SOURCE_DIR
set -euo pipefail
moesim=$1
engine=$2
src=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
scenario=$src/tests/data/scenarios/tiny_cpu_eplb.toml
steps=16

"$moesim" run "$scenario" --record "$tmp/steps.jsonl" > /dev/null
# The first placement record must apply within the replayed steps.
first=$(grep -m1 '"record":"placement"' "$tmp/steps.jsonl" |
        /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["step"])')
if [ "$first" -ge "$steps" ]; then
  echo "the first placement change is at step $first, after the $steps replayed steps"
  exit 1
fi
# EPLB places every MoE layer on its own: per-layer placement records.
if ! grep -m1 '"record":"placement"' "$tmp/steps.jsonl" | grep -q '"layer":'; then
  echo "the placement records name no layer: EPLB should place MoE layers separately"
  exit 1
fi
OMP_NUM_THREADS=1 "$engine" replay "$tmp/steps.jsonl" --out "$tmp/meas.jsonl" \
  --max-steps "$steps" --warmup 0 --repeats 1 > /dev/null
"$moesim" validate "$scenario" --profile "$src/profiles/cpu-amd-epyc.toml" \
  --measurements "$tmp/meas.jsonl" --json > "$tmp/report.json"
/usr/bin/python3 - "$tmp/report.json" "$steps" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
checked, mismatched = r["num_moe_layers_checked"], r["num_routing_mismatches"]
assert checked >= int(sys.argv[2]), f"only {checked} MoE layers checked"
assert mismatched == 0, f"{mismatched} of {checked} MoE layers re-simulated other bytes"
print(f"validate_placement_test: {checked} MoE layers reproduce the recorded routing")
PY

# The same steps under two-micro-batch overlap: the composition must equal the StepModel's.
sed -e "s#\"\.\./\.\./\.\./#\"$src/#" -e 's/^\[deployment\]$/[deployment]\nmicrobatch_overlap = true/' \
  "$scenario" > "$tmp/overlap.toml"
grep -q '^microbatch_overlap = true' "$tmp/overlap.toml"
"$moesim" run "$tmp/overlap.toml" --record "$tmp/overlap.jsonl" > /dev/null
OMP_NUM_THREADS=1 "$engine" replay "$tmp/overlap.jsonl" --out "$tmp/overlap.meas.jsonl" \
  --max-steps 4 --warmup 0 --repeats 1 > /dev/null
"$moesim" validate "$tmp/overlap.toml" --profile "$src/profiles/cpu-amd-epyc.toml" \
  --measurements "$tmp/overlap.meas.jsonl" --json > "$tmp/overlap.json"
/usr/bin/python3 - "$tmp/overlap.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["num_routing_mismatches"] == 0, r["num_routing_mismatches"]
assert r["step_duration"]["num_samples"] == 4, r["step_duration"]
# slices are whole nanoseconds: a few ns of rounding, not a different composition
assert r["max_composition_error_s"] < 1e-7, r["max_composition_error_s"]
print("validate_placement_test: overlapped steps compose as the StepModel runs them")
PY

# The micro-batch schedules: the trace records the schedule, the engine says it replays without
# overlap, and validate re-simulates and composes with the recorded schedule even though the
# scenario it is given has none.
for schedule in two_microbatch decode_pipeline; do
  sed -e "s#\"\.\./\.\./\.\./#\"$src/#" -e "s/^\[deployment\]\$/[deployment]\noverlap = \"$schedule\"/" \
    "$scenario" > "$tmp/$schedule.toml"
  grep -q "^overlap = \"$schedule\"" "$tmp/$schedule.toml"
  "$moesim" run "$tmp/$schedule.toml" --record "$tmp/$schedule.jsonl" > /dev/null
  grep -q "\"overlap\":\"$schedule\"" "$tmp/$schedule.jsonl"
  OMP_NUM_THREADS=1 "$engine" replay "$tmp/$schedule.jsonl" --out "$tmp/$schedule.meas.jsonl" \
    --max-steps 4 --warmup 0 --repeats 1 > "$tmp/$schedule.replay.txt"
  grep -q "without micro-batch overlap" "$tmp/$schedule.replay.txt"
  "$moesim" validate "$scenario" --profile "$src/profiles/cpu-amd-epyc.toml" \
    --measurements "$tmp/$schedule.meas.jsonl" --json > "$tmp/$schedule.json"
  /usr/bin/python3 - "$tmp/$schedule.json" "$schedule" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["num_routing_mismatches"] == 0, r["num_routing_mismatches"]
assert r["step_duration"]["num_samples"] == 4, r["step_duration"]
assert r["max_composition_error_s"] < 1e-7, r["max_composition_error_s"]
assert sys.argv[2] in r["overlap_note"] and "without overlap" in r["overlap_note"], r
print(f"validate_placement_test: {sys.argv[2]} steps compose on the recorded schedule")
PY
done
