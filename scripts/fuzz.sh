#!/usr/bin/env bash
# Runs every libFuzzer target of a clang sanitizer build for a bounded time each (make fuzz,
# .ci/run): usage: scripts/fuzz.sh BUILD_DIR SECONDS_PER_TARGET [TARGET...]
# Each target starts from the seed corpus (scripts/fuzz_corpus.sh) plus what earlier runs in this
# build directory added (BUILD_DIR/fuzz/corpus/<target>/). Any finding (crash, sanitizer report,
# an exception other than ConfigError, a run over 10 s, over 2 GB) is saved to
# BUILD_DIR/fuzz/findings/ and fails the script: minimise it (TARGET -minimize_crash=1 FILE), add
# it to tests/data/bad/ with its expected message, and fix the reader (docs/reliability.md).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: fuzz.sh BUILD_DIR SECONDS [TARGET...]}
seconds=${2:?usage: fuzz.sh BUILD_DIR SECONDS [TARGET...]}
shift 2
bin="$build/fuzz"
if [ ! -d "$bin" ]; then
  echo "fuzz.sh: no fuzz targets in $build (configure it with clang and -DMOESIM_SANITIZE=ON)" >&2
  exit 1
fi
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in tests/fuzz/*_fuzz.cc; do targets+=("$(basename "$f" .cc)"); done
fi
seeds="$build/fuzz/seeds"
scripts/fuzz_corpus.sh "$seeds" >/dev/null
mkdir -p "$build/fuzz/findings"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export LSAN_OPTIONS=suppressions=$PWD/scripts/lsan.supp:print_suppressions=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# Targets run FUZZ_JOBS at a time (default 1; `make fuzz` passes the core count); each writes its
# log and status, reported in target order once all have ended.
jobs=${FUZZ_JOBS:-1}
run_target() {
  local t=$1 corpus="$build/fuzz/corpus/$1" log="$build/fuzz/$1.log" start
  mkdir -p "$corpus" "$seeds/$t"
  start=$(date +%s)
  if "$bin/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=16384 \
      -artifact_prefix="$build/fuzz/findings/$t-" -print_final_stats=1 \
      "$corpus" "$seeds/$t" >"$log" 2>&1; then
    echo "ok $(( $(date +%s) - start ))" >"$build/fuzz/$t.status"
  else
    echo "finding" >"$build/fuzz/$t.status"
  fi
}
for t in "${targets[@]}"; do
  rm -f "$build/fuzz/$t.status"
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  run_target "$t" &
done
wait
failed=()
for t in "${targets[@]}"; do
  log="$build/fuzz/$t.log"
  read -r status secs <"$build/fuzz/$t.status" || status=finding
  if [ "$status" = ok ]; then
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo ?)
    echo "fuzz: $t: ok, $runs runs in $secs s"
  else
    echo "fuzz: $t: FINDING (log $log, inputs $build/fuzz/findings/$t-*)"
    grep -E 'ERROR|fuzz finding|runtime error|Test unit written' "$log" | head -5 || true
    failed+=("$t")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: findings in ${failed[*]}" >&2
  exit 1
fi
