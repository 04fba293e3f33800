#!/bin/bash
# Outputs through signals and failures (docs/outputs.md, "Writing outputs", "Interrupted
# commands"), end to end:
#   - SIGTERM, SIGINT and SIGHUP during `moesim run --out DIR --record FILE` remove every temporary
#     and the record's lock file, say so in one line on stderr and end with 128 + the signal; the
#     directory keeps no summary.json (nothing that looks complete);
#   - a second run on a --record file another run holds is refused (exit 2) before it simulates;
#   - a write over the file size limit (standing for a full disk) names the file that hit it first
#     (trace.json, whose window fills it during the run), not the first one renamed into place,
#     and leaves the earlier run's directory whole.
# usage: interrupted_outputs_test.sh MOESIM SOURCE_DIR WORK_DIR
set -u
moesim=$1
src=$2
work=$3
rm -rf "$work"
mkdir -p "$work"
quick="$src/scenarios/quickstart.toml"
fail() {
  echo "FAIL: $*"
  exit 1
}
leftovers() {
  find "$work" \( -name '.*.tmp.*' -o -name '.*.moesim.lock' \) -print
}

# 1. Signals. Job control, so that the background run does not start with SIGINT ignored.
set -m
for sig in TERM INT HUP; do
  out="$work/$sig"
  "$moesim" run "$quick" --duration 100000 --set workload.duration_s=100000 --out "$out" --record "$work/$sig.jsonl" \
    >/dev/null 2>"$work/$sig.err" &
  pid=$!
  for _ in $(seq 1 500); do
    compgen -G "$out/.trace.json.tmp.*" >/dev/null && break
    sleep 0.01
  done
  compgen -G "$out/.trace.json.tmp.*" >/dev/null || fail "SIG$sig: the run never started"
  kill -s "$sig" "$pid"
  wait "$pid"
  rc=$?
  num=$(kill -l "$sig")
  [ $rc -eq $((128 + num)) ] || fail "SIG$sig: expected exit $((128 + num)), got $rc"
  err=$(<"$work/$sig.err")
  [ "$err" = "moesim: stopped by SIG$sig: removed 4 temporary files" ] || fail "SIG$sig: $err"
  left=$(leftovers)
  [ -z "$left" ] || fail "SIG$sig: left behind: $left"
  [ ! -e "$out/summary.json" ] || fail "SIG$sig: $out looks complete"
done
set +m

# 2. The --record lock: flock(1) holds it as a running run would (a short run: refused or not, the
# test does not wait).
if command -v flock >/dev/null; then
  lock="$work/.held.jsonl.moesim.lock"
  err=$(flock "$lock" "$moesim" run "$quick" --duration 1 --record "$work/held.jsonl" 2>&1 \
    >/dev/null)
  rc=$?
  [ $rc -eq 2 ] || fail "locked --record: expected exit 2, got $rc: $err"
  [[ $err == *"$work/held.jsonl: --record: in use by another moesim run (it holds $lock)"* ]] ||
    fail "locked --record: $err"
  rm -f "$lock"
else
  echo "flock(1) not found: lock check skipped"
fi

# 3. A full disk, as a file size limit: every file past 1 KiB fails. The Chrome trace's window
# (5.0-5.2 s) passes it first, while the run goes; summary.json, the first renamed, is not the
# culprit.
out="$work/full"
"$moesim" run "$quick" --duration 1 --out "$out" >/dev/null || fail "the first run into $out"
cp "$out/summary.json" "$work/summary.before"
err=$( (
  trap '' XFSZ
  ulimit -f 1
  exec "$moesim" run "$quick" --duration 6 --out "$out"
) 2>&1 >/dev/null)
rc=$?
[ $rc -eq 1 ] || fail "write over the size limit: expected exit 1, got $rc: $err"
[ "$err" = "moesim: error: cannot write $out/trace.json: File too large" ] ||
  fail "write over the size limit: $err"
# 4. Past 64 KiB only trace.json fails: nothing of the new run is renamed into place.
err=$( (
  trap '' XFSZ
  ulimit -f 64
  exec "$moesim" run "$quick" --duration 6 --out "$out"
) 2>&1 >/dev/null)
[ "$err" = "moesim: error: cannot write $out/trace.json: File too large" ] ||
  fail "trace.json over the size limit: $err"
cmp -s "$out/summary.json" "$work/summary.before" || fail "the earlier run's summary.json changed"
left=$(leftovers)
[ -z "$left" ] || fail "temporaries left behind after a failed write: $left"
echo "ok"
