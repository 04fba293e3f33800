#!/usr/bin/env bash
# Self-check of scripts/gpu_check.sh on a machine without GPUs: shellcheck (when installed), a
# refusal with exit 2 when the carried dependencies are missing, --prepare-third-party from the
# Debian packages (when installed), and a --dry-run whose plan has every step of the GPU run.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SCRIPT=$ROOT/scripts/gpu_check.sh
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

if command -v shellcheck >/dev/null; then
  shellcheck "$SCRIPT" || fail "shellcheck"
fi

MOESIM_THIRD_PARTY=$TMP/none "$SCRIPT" --dry-run "$TMP/out" >/dev/null
rc=$?
((rc == 2)) || fail "missing dependencies: exit $rc, expected 2"
grep -q "FAIL missing $TMP/none/include/eigen3/Eigen" "$TMP/out/summary.txt" ||
  fail "missing dependencies are not named in summary.txt"

if [[ -d /usr/include/eigen3 && -d /usr/src/googletest && -d /usr/include/toml++ &&
  -d /usr/share/cmake/nlohmann_json ]]; then
  MOESIM_THIRD_PARTY=$TMP/tp "$SCRIPT" --prepare-third-party >/dev/null ||
    fail "--prepare-third-party"
else
  # No Debian packages here: the layout the dry run checks.
  mkdir -p "$TMP/tp/include/eigen3/Eigen" "$TMP/tp/include/nlohmann" "$TMP/tp/include/toml++" \
    "$TMP/tp/share/eigen3/cmake" "$TMP/tp/share/cmake/nlohmann_json" "$TMP/tp/googletest"
  touch "$TMP/tp/include/nlohmann/json.hpp" "$TMP/tp/include/toml++/toml.h" \
    "$TMP/tp/googletest/CMakeLists.txt"
fi

MOESIM_THIRD_PARTY=$TMP/tp "$SCRIPT" --dry-run "$TMP/out" >/dev/null ||
  fail "--dry-run exit $?"
S=$TMP/out/summary.txt
for step in configure build cuda_tests replay_cuda replay_cpu_2ranks bench_cuda; do
  grep -q "PLAN $step " "$S" || fail "the plan has no step $step"
done
grep -q "PLAN configure .*-DMOESIM_ENGINE_ONLY=ON .*-DMOESIM_WITH_CUDA=ON" "$S" ||
  fail "configure is not engine-only with CUDA"
grep -q "PLAN configure .*-DMOESIM_GTEST_SOURCE_DIR=$TMP/tp/googletest" "$S" ||
  fail "configure does not use the carried GoogleTest sources"
grep -q "PLAN replay_cuda .*--backend cuda --out $TMP/out/replay_cuda.jsonl" "$S" ||
  fail "the replay does not write into OUT_DIR"
grep -q "PLAN bench_cuda .*--out $TMP/out/bench_cuda.jsonl" "$S" ||
  fail "the bench does not write into OUT_DIR"
MOESIM_THIRD_PARTY=$TMP/tp "$SCRIPT" --dry-run --cpu "$TMP/out" >/dev/null || fail "--dry-run --cpu"
grep -q "PLAN cpu_tests .*moesim_engine_tests" "$S" || fail "the CPU plan has no CPU tests"
"$SCRIPT" --frobnicate "$TMP/out" 2>/dev/null
(($? == 2)) || fail "unknown option: expected exit 2"
echo "gpu_check.sh self-check passed"
