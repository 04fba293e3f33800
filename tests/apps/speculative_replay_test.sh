#!/usr/bin/env bash
# Speculative decoding's step trace replays on the CPU engine (docs/serving.md, "Speculative
# decoding"): record the tiny MTP scenario (2 drafts, every draft accepted), check that its
# decode sequences verify 1 + 2 tokens, and replay the first steps holding such sequences.
# Usage: speculative_replay_test.sh MOESIM MOESIM_ENGINE SOURCE_DIR
set -euo pipefail
moesim=$1
engine=$2
src=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$moesim" run "$src/tests/data/scenarios/tiny_mtp.toml" --record "$tmp/steps.jsonl" \
  --record-steps 12 > /dev/null
/usr/bin/python3 - "$tmp/steps.jsonl" <<'PY'
import json, sys
steps = [json.loads(l) for l in open(sys.argv[1])]
steps = [s for s in steps if s.get("record") == "step"]
decode = [q["new_tokens"] for s in steps for q in s["sequences"] if q["phase"] == "decode"]
assert decode, "no decode sequence recorded"
assert set(decode) <= {1, 2, 3} and 3 in decode, sorted(set(decode))
print(f"speculative_replay_test: {len(decode)} decode sequences, verifying {sorted(set(decode))}")
PY
OMP_NUM_THREADS=1 "$engine" replay "$tmp/steps.jsonl" --out "$tmp/meas.jsonl" \
  --max-steps 12 --warmup 0 --repeats 1 --gpus 0 > "$tmp/replay.txt"
grep -q "replayed 12 steps" "$tmp/replay.txt" || { cat "$tmp/replay.txt"; exit 1; }
# The output head computes the logits of every verified token, as the simulator prices it: one
# row per prefill sequence and one per new token of a decode sequence.
/usr/bin/python3 - "$tmp/steps.jsonl" "$tmp/meas.jsonl" <<'PY'
import json, sys
want = {}
for line in open(sys.argv[1]):
    s = json.loads(line)
    if s.get("record") != "step":
        continue
    want[s["step"]] = sum(1 if q["phase"] == "prefill" else q["new_tokens"]
                          for q in s["sequences"] if q["gpu"] == 0)
heads = [json.loads(l) for l in open(sys.argv[2])]
heads = [r for r in heads if r.get("record") == "op" and r["op"] == "lm_head"]
assert heads, "no output head replayed on GPU 0"
for r in heads:
    assert r["tokens"] == want[r["step"]], (r["step"], r["tokens"], want[r["step"]])
assert any(r["tokens"] > r["num_sequences"] for r in heads), "no verification of 1 + d rows"
print(f"speculative_replay_test: {len(heads)} output heads with 1 + d rows per verification")
PY
echo "speculative_replay_test: the verification steps replay on the CPU engine"
