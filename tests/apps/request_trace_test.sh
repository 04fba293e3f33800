#!/bin/bash
# The request trace end to end (docs/schemas/request_trace.md, docs/workload.md):
#   - `run --export-requests` of the calibration chat workload, shortened, then the same scenario
#     with [workload] kind = "request_trace" on that file: requests.csv's request ids, arrivals,
#     prompt and output tokens and outcomes are identical (and so is the rest of the file);
#   - a bad row and an unknown [workload] key are bad input (exit 2) naming file, line and key;
#   - an unwritable path is bad input (exit 2); a write that fails (EFBIG) exits 1 naming the path
#     and the errno text and keeps the old file.
# usage: request_trace_test.sh MOESIM SOURCE_DIR WORK_DIR
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

# The chat workload for 0.05 s (about 1,000 arrivals: the trace passes the writer's 64 KiB buffer).
sed -e "s|\"\.\./\.\./|\"$src/|" -e 's/^duration_s = 0.2$/duration_s = 0.05/' \
  "$src/scenarios/calibration/tiny-cpu-chat.toml" >"$work/chat.toml"
grep -q '^duration_s = 0.05$' "$work/chat.toml" || fail "could not shorten the scenario"
"$moesim" run "$work/chat.toml" --out "$work/a" --export-requests "$work/requests.jsonl" \
  >/dev/null || fail "export run failed"
records=$(($(wc -l <"$work/requests.jsonl") - 1))
rows=$(($(wc -l <"$work/a/requests.csv") - 1))
[ "$records" -gt 500 ] || fail "only $records request records"
[ "$records" -eq "$rows" ] || fail "$records request records for $rows requests.csv rows"
left=$(find "$work" -name '.*.tmp.*' -o -name '.*.moesim.lock')
[ -z "$left" ] || fail "temporaries or locks left behind: $left"

# The same scenario replaying the trace: [workload] replaced.
awk '/^\[workload/ {skip = 1; next} /^\[/ {skip = 0} !skip' "$work/chat.toml" >"$work/replay.toml"
printf '[workload]\nkind = "request_trace"\npath = "requests.jsonl"\n' >>"$work/replay.toml"
"$moesim" run "$work/replay.toml" --out "$work/b" >/dev/null || fail "replay run failed"
# request_id, outcome, arrival_ns, prompt_tokens, output_tokens
cut -d, -f1,7,9,13,14 "$work/a/requests.csv" >"$work/a.cols"
cut -d, -f1,7,9,13,14 "$work/b/requests.csv" >"$work/b.cols"
cmp -s "$work/a.cols" "$work/b.cols" ||
  fail "replayed requests differ: $(diff "$work/a.cols" "$work/b.cols" | head -5)"
# Every other column too: the run's other random streams do not depend on the workload's.
cmp -s "$work/a/requests.csv" "$work/b/requests.csv" || fail "replayed requests.csv differs"

# Bad input: a bad row, an unknown key.
head -2 "$work/requests.jsonl" >"$work/bad.jsonl"
echo '{"record": "request", "request_id": 99999, "arrival_ns": 1, "prompt_tokens": 0, "output_tokens": 1}' \
  >>"$work/bad.jsonl"
sed 's|path = "requests.jsonl"|path = "bad.jsonl"|' "$work/replay.toml" >"$work/bad.toml"
err=$("$moesim" run "$work/bad.toml" 2>&1 >/dev/null)
rc=$?
[ $rc -eq 2 ] || fail "bad row: expected exit 2, got $rc: $err"
[[ $err == *"$work/bad.jsonl:3: prompt_tokens: value 0 is outside [1, "* ]] || fail "bad row: $err"
printf 'rate_multiplier = 2\n' >>"$work/replay.toml"
err=$("$moesim" run "$work/replay.toml" 2>&1 >/dev/null)
rc=$?
[ $rc -eq 2 ] || fail "unknown key: expected exit 2, got $rc: $err"
[[ $err == *"replay.toml"*"workload.rate_multiplier"* ]] || fail "unknown key: $err"

# Output failures: an unwritable path (before the run), a write over the size limit (after it).
err=$("$moesim" run "$work/chat.toml" --export-requests "$work/no/such/dir/r.jsonl" 2>&1 >/dev/null)
rc=$?
[ $rc -eq 2 ] || fail "unwritable path: expected exit 2, got $rc: $err"
[[ $err == *"$work/no/such/dir/r.jsonl: --export-requests:"* ]] || fail "unwritable path: $err"
cp "$work/requests.jsonl" "$work/requests.before"
err=$( (
  trap '' XFSZ
  ulimit -f 64
  exec "$moesim" run "$work/chat.toml" --export-requests "$work/requests.jsonl"
) 2>&1 >/dev/null)
rc=$?
[ $rc -eq 1 ] || fail "write over the size limit: expected exit 1, got $rc: $err"
[[ $err == "moesim: error: cannot write $work/requests.jsonl: "*"File too large" ]] ||
  fail "write over the size limit: $err"
cmp -s "$work/requests.jsonl" "$work/requests.before" || fail "the old trace was replaced"
left=$(find "$work" -name '.*.tmp.*')
[ -z "$left" ] || fail "temporaries left behind after a failed write: $left"
echo "request trace: $records records, replay identical"
