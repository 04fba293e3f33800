#!/bin/bash
# Outputs never lie (docs/outputs.md, "Writing outputs"), end to end:
#   - a second run on an --out directory another run holds is refused (exit 2) before it
#     simulates; flock(1) holds DIR/.moesim.lock as a concurrent run would;
#   - a write that fails (a file size limit: EFBIG) exits 1 naming the path and the errno text,
#     keeps the file that was there and leaves no temporary behind;
#   - calibrate -o on a full device, and sweep's CSV on a full stdout, exit 1;
#   - a successful run leaves only its outputs (no temporaries).
# usage: output_files_test.sh MOESIM SOURCE_DIR WORK_DIR
set -u
moesim=$1
src=$2
work=$3
rm -rf "$work"
mkdir -p "$work/out"
tiny="$src/tests/data/scenarios/tiny_agent.toml"
fail() {
  echo "FAIL: $*"
  exit 1
}

# 1. The lock: refused at once (a 1e5 s simulation would time the test out).
if command -v flock >/dev/null; then
  err=$(flock "$work/out/.moesim.lock" "$moesim" run "$src/scenarios/quickstart.toml" \
    --duration 100000 --out "$work/out" 2>&1 >/dev/null)
  rc=$?
  [ $rc -eq 2 ] || fail "locked --out: expected exit 2, got $rc: $err"
  [[ $err == *"$work/out: --out: in use by another moesim run"* ]] || fail "locked --out: $err"
else
  echo "flock(1) not found: lock check skipped"
fi

# 2. Without a holder the same directory is written, twice (the second run replaces files).
for i in 1 2; do
  "$moesim" run "$tiny" --duration 0.2 --out "$work/out" --record "$work/steps.jsonl" \
    >/dev/null || fail "run $i into $work/out failed"
done
[ -s "$work/out/summary.json" ] || fail "no summary.json"
left=$(find "$work" -name '.*.tmp.*')
[ -z "$left" ] || fail "temporaries left behind: $left"

# 3. A failed write keeps the old file: the step trace is larger than the 8 KiB limit.
cp "$work/steps.jsonl" "$work/steps.before"
err=$( (
  trap '' XFSZ
  ulimit -f 8
  exec "$moesim" run "$tiny" --duration 0.2 --record "$work/steps.jsonl"
) 2>&1 >/dev/null)
rc=$?
[ $rc -eq 1 ] || fail "write over the size limit: expected exit 1, got $rc: $err"
[[ $err == "moesim: error: cannot write $work/steps.jsonl: File too large" ]] ||
  fail "write over the size limit: $err"
cmp -s "$work/steps.jsonl" "$work/steps.before" || fail "the old steps.jsonl was replaced"
left=$(find "$work" -name '.*.tmp.*')
[ -z "$left" ] || fail "temporaries left behind after a failed write: $left"

# 4. calibrate -o on a full device (a measurement file it can fit: one op kind, 8 sizes).
if [ -e /dev/full ]; then
  meas="$work/meas.jsonl"
  head -1 "$src/tests/data/calibration/meas_bench.jsonl" >"$meas"
  for t in 1 2 4 8 16 32 64 128; do
    ns=$((30000 + t * 700))
    echo "{\"record\": \"bench\", \"op\": \"attn_mla_decode\", \"tokens\": $t," \
      "\"context_tokens\": 2048, \"flops\": $((t * 75))e6, \"bytes\": 3.4e7," \
      "\"measured_ns\": $ns, \"min_ns\": $ns, \"max_ns\": $ns}" >>"$meas"
  done
  "$moesim" calibrate "$meas" -o "$work/profile.toml" >/dev/null || fail "calibrate failed"
  err=$("$moesim" calibrate "$meas" -o /dev/full 2>&1 >/dev/null)
  rc=$?
  [ $rc -eq 1 ] || fail "calibrate -o /dev/full: expected exit 1, got $rc: $err"
  [[ $err == *"cannot write /dev/full: No space left on device"* ]] || fail "calibrate: $err"
  # 5. sweep's CSV on stdout is checked too.
  err=$("$moesim" sweep "$src/tests/data/study/grid.toml" --threads 2 2>&1 >/dev/full)
  rc=$?
  [ $rc -eq 1 ] || fail "sweep >/dev/full: expected exit 1, got $rc: $err"
  [[ $err == *"cannot write the CSV to stdout"* ]] || fail "sweep >/dev/full: $err"
fi
echo "ok"
