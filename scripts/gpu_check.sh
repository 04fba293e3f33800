#!/usr/bin/env bash
# GPU check for a machine with only the CUDA toolkit (no package registry): configure the engine
# alone, build it, run the CUDA-vs-CPU tests, replay one shipped step trace on the GPU, run the
# GPU bench, and write every log and result to OUT_DIR. Bounded to ~8 minutes in total; every
# step has its own timeout and failures are reported (nonzero exit), never hung on.
#
# Usage: scripts/gpu_check.sh OUT_DIR
# Header-only dependencies and GoogleTest sources come from $MOESIM_THIRD_PARTY (default
# ./third_party), prepared on a Debian machine as described in docs/cuda.md:
#   third_party/include/{eigen3,nlohmann,toml++}   third_party/googletest
set -uo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: $0 OUT_DIR" >&2
  exit 2
fi
OUT_DIR=$1
mkdir -p "$OUT_DIR" || { echo "gpu_check: cannot create $OUT_DIR" >&2; exit 2; }
OUT_DIR=$(cd "$OUT_DIR" && pwd)
ROOT=$(cd "$(dirname "$0")/.." && pwd)
THIRD_PARTY=${MOESIM_THIRD_PARTY:-$ROOT/third_party}
BUILD=${MOESIM_GPU_BUILD_DIR:-$ROOT/build-gpu-check}
JOBS=$(nproc 2>/dev/null || echo 4)
START=$(date +%s)
BUDGET_S=470  # leave a margin under 8 minutes
STATUS=0

log() { echo "[gpu_check $(($(date +%s) - START))s] $*" | tee -a "$OUT_DIR/summary.txt"; }
remaining() { echo $((BUDGET_S - ($(date +%s) - START))); }
# run NAME MAX_SECONDS CMD...: runs with a timeout bounded by the remaining budget.
run() {
  local name=$1 max=$2
  shift 2
  local left
  left=$(remaining)
  if ((left <= 5)); then
    log "SKIP $name: time budget exhausted"
    STATUS=1
    return 1
  fi
  ((max > left)) && max=$left
  log "RUN  $name (timeout ${max}s)"
  timeout --kill-after=10 "$max" "$@" >"$OUT_DIR/$name.log" 2>&1
  local rc=$?
  if ((rc == 0)); then
    log "OK   $name"
  else
    [[ $rc -eq 124 || $rc -eq 137 ]] && log "FAIL $name: timed out" || log "FAIL $name: exit $rc"
    tail -n 20 "$OUT_DIR/$name.log" | sed 's/^/     | /' | tee -a "$OUT_DIR/summary.txt"
    STATUS=1
  fi
  return $rc
}

: >"$OUT_DIR/summary.txt"
log "repo $ROOT, third_party $THIRD_PARTY, out $OUT_DIR"
command -v nvidia-smi >/dev/null && nvidia-smi >"$OUT_DIR/nvidia-smi.txt" 2>&1
for need in include/eigen3/Eigen include/nlohmann/json.hpp include/toml++/toml.h googletest/CMakeLists.txt; do
  if [[ ! -e "$THIRD_PARTY/$need" ]]; then
    log "FAIL missing $THIRD_PARTY/$need (see docs/cuda.md, 'Preparing third_party')"
    exit 2
  fi
done

CMAKE_ARGS=(-S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DMOESIM_ENGINE_ONLY=ON
  -DMOESIM_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90
  -DCMAKE_PREFIX_PATH="$THIRD_PARTY"
  -DEigen3_DIR="$THIRD_PARTY/share/eigen3/cmake"
  -Dnlohmann_json_DIR="$THIRD_PARTY/share/cmake/nlohmann_json"
  -DMOESIM_TOMLPP_INCLUDE="$THIRD_PARTY/include"
  -DMOESIM_GTEST_SOURCE_DIR="$THIRD_PARTY/googletest")
# cmake can exit 0 from a half-generated tree only at make time; check configure's own status.
run configure 120 cmake "${CMAKE_ARGS[@]}" || { log "configure failed; stopping"; exit 1; }
run build 300 cmake --build "$BUILD" -j "$JOBS" --target moesim_engine_cuda_tests moesim-engine \
  || { log "build failed; stopping"; exit 1; }

run cuda_tests 120 "$BUILD/tests/engine/cuda/moesim_engine_cuda_tests" \
  --gtest_output="xml:$OUT_DIR/cuda_tests.xml"
if grep -q "SKIPPED" "$OUT_DIR/cuda_tests.log" && ! grep -q "PASSED" "$OUT_DIR/cuda_tests.log"; then
  log "FAIL cuda_tests: every test skipped (no device visible?)"
  STATUS=1
fi

ENGINE="$BUILD/engine/moesim-engine"
TRACE=$(ls "$ROOT"/tests/data/engine/*.jsonl 2>/dev/null | head -n 1)
if [[ -n "$TRACE" ]]; then
  run replay 90 "$ENGINE" replay "$TRACE" --backend cuda
else
  log "FAIL replay: no tests/data/engine/*.jsonl trace shipped"
  STATUS=1
fi
run bench 90 "$ENGINE" bench --backend cuda

log "done: status $STATUS"
exit $STATUS
