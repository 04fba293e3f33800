#!/usr/bin/env bash
# GPU check for a machine with only the CUDA toolkit (no package registry): configure the engine
# alone (MOESIM_ENGINE_ONLY) against the header-only dependencies and GoogleTest sources carried
# in a folder, build it, run the CUDA-vs-CPU tests, replay the shipped step trace on the GPU
# (single rank) and on two in-process CPU ranks (the multi-rank path), serve a request trace on
# the GPU and on two CPU ranks (moesim-engine serve), run the GPU bench, and
# write every log and result to OUT_DIR. Bounded to 8 minutes in total; every step has its own
# timeout and failures are reported (nonzero exit), never hung on.
#
# Usage:
#   scripts/gpu_check.sh OUT_DIR              GPU run when a device is visible, else the CPU parts
#   scripts/gpu_check.sh --cpu OUT_DIR        the CPU parts only: the same configure with the same
#                                             carried dependencies, CUDA off, the CPU engine tests,
#                                             replays and bench (a self-check on a machine without
#                                             GPUs)
#   scripts/gpu_check.sh --dry-run [--cpu] OUT_DIR
#                                             check the arguments and the carried dependencies,
#                                             write the plan of the GPU run (or of --cpu: every
#                                             command and its timeout) to OUT_DIR/summary.txt,
#                                             run nothing
#   scripts/gpu_check.sh --prepare-third-party copy the dependencies from this Debian machine's
#                                             packages into $MOESIM_THIRD_PARTY (default
#                                             ./third_party), to carry to the GPU machine
# Environment: MOESIM_THIRD_PARTY (default ./third_party), MOESIM_GPU_BUILD_DIR (default
# ./build-gpu-check), MOESIM_CUDA_ARCHS (default 90: H100/H200).
# Layout of the carried folder (docs/cuda.md):
#   include/{eigen3,nlohmann,toml++}  share/eigen3/cmake  share/cmake/nlohmann_json  googletest/
# Exit: 0 every step passed; 1 a step failed or timed out (summary.txt has the tail of its log);
# 2 usage error or missing dependencies.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
THIRD_PARTY=${MOESIM_THIRD_PARTY:-$ROOT/third_party}

prepare_third_party() {
  local tp=$THIRD_PARTY
  local src
  for src in /usr/include/eigen3 /usr/include/nlohmann /usr/include/toml++ /usr/share/eigen3 \
    /usr/share/cmake/nlohmann_json /usr/src/googletest; do
    if [[ ! -e $src ]]; then
      echo "gpu_check: $src missing: apt-get install libeigen3-dev nlohmann-json3-dev" \
        "libtomlplusplus-dev googletest" >&2
      return 2
    fi
  done
  mkdir -p "$tp/include" "$tp/share/cmake" || return 2
  cp -rL /usr/include/eigen3 /usr/include/nlohmann /usr/include/toml++ "$tp/include/" &&
    cp -rL /usr/share/eigen3 "$tp/share/" &&
    cp -rL /usr/share/cmake/nlohmann_json "$tp/share/cmake/" &&
    rm -rf "$tp/googletest" && cp -rL /usr/src/googletest "$tp/googletest" || return 2
  echo "gpu_check: dependencies copied to $tp ($(du -sh "$tp" | cut -f1))"
}

MODE=auto # gpu | cpu: what runs (auto: gpu when a device is visible)
DRY_RUN=0
while [[ $# -gt 0 && $1 == --* ]]; do
  case $1 in
    --cpu) MODE=cpu ;;
    --dry-run) DRY_RUN=1 ;;
    --prepare-third-party)
      prepare_third_party
      exit $?
      ;;
    *)
      echo "gpu_check: unknown option $1" >&2
      exit 2
      ;;
  esac
  shift
done
if [[ $# -ne 1 ]]; then
  echo "usage: $0 [--cpu] [--dry-run] OUT_DIR  |  $0 --prepare-third-party" >&2
  exit 2
fi
OUT_DIR=$1
mkdir -p "$OUT_DIR" || {
  echo "gpu_check: cannot create $OUT_DIR" >&2
  exit 2
}
OUT_DIR=$(cd "$OUT_DIR" && pwd)
BUILD=${MOESIM_GPU_BUILD_DIR:-$ROOT/build-gpu-check}
JOBS=$(nproc 2>/dev/null || echo 4)
START=$(date +%s)
BUDGET_S=470 # leave a margin under 8 minutes
STATUS=0

if [[ $MODE == auto ]]; then
  if ((DRY_RUN)) || [[ -e /dev/nvidia0 ]] || nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
    MODE=gpu
  else
    MODE=cpu
  fi
fi

: >"$OUT_DIR/summary.txt"
log() { echo "[gpu_check $(($(date +%s) - START))s] $*" | tee -a "$OUT_DIR/summary.txt"; }
remaining() { echo $((BUDGET_S - ($(date +%s) - START))); }
# run NAME MAX_SECONDS CMD...: runs CMD with its output in OUT_DIR/NAME.log, under a timeout
# bounded by the remaining budget. --dry-run only records the command.
run() {
  local name=$1 max=$2
  shift 2
  if ((DRY_RUN)); then
    log "PLAN $name (timeout ${max}s): $*"
    return 0
  fi
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
    if [[ $rc -eq 124 || $rc -eq 137 ]]; then
      log "FAIL $name: timed out"
    else
      log "FAIL $name: exit $rc"
    fi
    tail -n 20 "$OUT_DIR/$name.log" | sed 's/^/     | /' | tee -a "$OUT_DIR/summary.txt"
    STATUS=1
  fi
  return $rc
}

log "mode $MODE$( ((DRY_RUN)) && echo ' (dry run)'), repo $ROOT, third_party $THIRD_PARTY, build $BUILD, out $OUT_DIR"
if [[ $MODE == gpu ]] && ((!DRY_RUN)); then
  nvidia-smi >"$OUT_DIR/nvidia-smi.txt" 2>&1 || log "note: nvidia-smi unavailable"
fi
missing=0
for need in include/eigen3/Eigen include/nlohmann/json.hpp include/toml++/toml.h \
  share/eigen3/cmake share/cmake/nlohmann_json googletest/CMakeLists.txt; do
  if [[ ! -e "$THIRD_PARTY/$need" ]]; then
    log "FAIL missing $THIRD_PARTY/$need (run $0 --prepare-third-party on a Debian machine; see docs/cuda.md)"
    missing=1
  fi
done
((missing)) && exit 2
TRACE=$(find "$ROOT/tests/data/engine" -maxdepth 1 -name '*.jsonl' 2>/dev/null | sort | head -n 1)
if [[ -z $TRACE ]]; then
  log "FAIL no tests/data/engine/*.jsonl trace shipped"
  exit 2
fi

if [[ $MODE == gpu ]]; then
  BACKEND=cuda
  CUDA_ARGS=(-DMOESIM_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="${MOESIM_CUDA_ARCHS:-90}")
  TEST_TARGET=moesim_engine_cuda_tests
  TEST_BINARY=$BUILD/tests/engine/cuda/moesim_engine_cuda_tests
  # The points of the issue's targets (expert FFN at large token counts, MLA decode at long
  # context) without the largest prefill sweeps; points whose cache does not fit are skipped.
  BENCH_ARGS=(--backend cuda --tokens "1,16,128,512,2048" --contexts "1024,32768")
else
  BACKEND=cpu
  CUDA_ARGS=(-DMOESIM_WITH_CUDA=OFF)
  TEST_TARGET=moesim_engine_tests
  TEST_BINARY=$BUILD/tests/engine/moesim_engine_tests
  BENCH_ARGS=(--backend cpu --tokens "1,16" --contexts 256)
fi
# Only the carried dependencies: packages installed on this machine are not looked up (so the
# CPU self-check configures exactly as the GPU machine will).
CMAKE_ARGS=(-S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DMOESIM_ENGINE_ONLY=ON
  -DMOESIM_BENCHMARKS=OFF "${CUDA_ARGS[@]}"
  -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON -DCMAKE_DISABLE_FIND_PACKAGE_tomlplusplus=ON
  -DEigen3_DIR="$THIRD_PARTY/share/eigen3/cmake"
  -Dnlohmann_json_DIR="$THIRD_PARTY/share/cmake/nlohmann_json"
  -DMOESIM_TOMLPP_INCLUDE="$THIRD_PARTY/include"
  -DMOESIM_GTEST_SOURCE_DIR="$THIRD_PARTY/googletest")
ENGINE=$BUILD/engine/moesim-engine

# cmake's own exit status is checked: a half-generated tree still builds with exit 0.
run configure 120 cmake "${CMAKE_ARGS[@]}" || {
  log "configure failed; stopping"
  exit 1
}
run build 300 cmake --build "$BUILD" -j "$JOBS" --target "$TEST_TARGET" moesim-engine || {
  log "build failed; stopping"
  exit 1
}
run "${BACKEND}_tests" 120 "$TEST_BINARY" --gtest_output="xml:$OUT_DIR/${BACKEND}_tests.xml"
if [[ $MODE == gpu ]] && ((!DRY_RUN)) && grep -q "SKIPPED" "$OUT_DIR/cuda_tests.log" &&
  ! grep -q "PASSED" "$OUT_DIR/cuda_tests.log"; then
  log "FAIL cuda_tests: every test skipped (no device visible?)"
  STATUS=1
fi
run "replay_$BACKEND" 90 "$ENGINE" replay "$TRACE" --backend "$BACKEND" \
  --out "$OUT_DIR/replay_$BACKEND.jsonl"
# The multi-rank path (ranks as CPU threads, real all-to-alls); NCCL with one rank is covered by
# the CUDA tests (NcclCommunicatorTest), a single H200 cannot host two NCCL ranks.
run replay_cpu_2ranks 60 "$ENGINE" replay "$TRACE" --backend cpu --nranks 2 \
  --out "$OUT_DIR/replay_cpu_2ranks.jsonl"
# The serving loop: a one-GPU request trace on the backend under test (the CUDA backend serves
# one GPU), and the two-rank trace on CPU threads (the multi-rank serving path).
run "serve_$BACKEND" 60 "$ENGINE" serve "$ROOT/tests/data/engine/tiny_serve_1gpu.jsonl" \
  --backend "$BACKEND" --out "$OUT_DIR/serve_$BACKEND"
run serve_cpu_2ranks 60 "$ENGINE" serve "$ROOT/tests/data/engine/tiny_serve_ep2.jsonl" \
  --backend cpu --out "$OUT_DIR/serve_cpu_2ranks"
run "bench_$BACKEND" 150 "$ENGINE" bench "${BENCH_ARGS[@]}" --out "$OUT_DIR/bench_$BACKEND.jsonl"

if [[ $MODE == cpu ]]; then
  log "note: no GPU used (mode cpu): CUDA was not built and no GPU test ran"
fi
log "done: status $STATUS"
exit $STATUS
