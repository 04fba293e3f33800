#!/usr/bin/env bash
# Assembles the seed corpus of every libFuzzer target (tests/fuzz/) from the files the repository
# ships: usage: scripts/fuzz_corpus.sh OUT_DIR  ->  OUT_DIR/<target>/ (one directory per target).
# Small files are copied whole; the shipped traces (data/traces/, MBs) are cut to their first
# lines, so that every seed stays a few KB and fuzzing starts from realistic records.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: fuzz_corpus.sh OUT_DIR}
rm -rf "$out"
mkdir -p "$out"

# copy TARGET FILE...: whole files up to 64 KB (bigger ones are cut to 64 KB).
copy() {
  local target=$1
  shift
  mkdir -p "$out/$target"
  local f
  for f in "$@"; do
    [ -f "$f" ] || continue
    head -c 65536 "$f" >"$out/$target/$(echo "$f" | tr '/' '_')"
  done
}
# head_lines TARGET LINES FILE...: the first LINES lines of each file.
head_lines() {
  local target=$1 lines=$2
  shift 2
  mkdir -p "$out/$target"
  local f
  for f in "$@"; do
    [ -f "$f" ] || continue
    head -n "$lines" "$f" | head -c 65536 >"$out/$target/$(echo "$f" | tr '/' '_').head$lines"
  done
}

shopt -s nullglob
copy hf_config_fuzz models/*.json tests/data/bad/models/*.json
copy model_card_fuzz models/*.toml tests/data/bad/models/*.toml
copy topology_fuzz topologies/*.toml tests/data/bad/topologies/*.toml
copy scenario_fuzz scenarios/*.toml scenarios/*/*.toml tests/data/bad/scenarios/*.toml
copy mooncake_fuzz tests/data/bad/workload/*.jsonl
head_lines mooncake_fuzz 8 data/traces/*.jsonl
copy azure_fuzz tests/data/bad/workload/*.csv
head_lines azure_fuzz 12 data/traces/*.csv
copy step_trace_fuzz tests/data/calibration/trace_*.jsonl tests/data/engine/*.jsonl \
  tests/data/bad/calibration/trace_*.jsonl
copy engine_step_trace_fuzz tests/data/calibration/trace_*.jsonl tests/data/engine/*.jsonl \
  tests/data/bad/calibration/trace_*.jsonl tests/data/bad/engine/*.jsonl
copy engine_request_trace_fuzz tests/data/engine/tiny_requests.jsonl tests/data/engine/tiny_serve_*.jsonl
copy request_trace_fuzz tests/data/engine/tiny_requests.jsonl tests/data/engine/tiny_serve_*.jsonl
copy routing_trace_fuzz tests/data/bad/routing/*.jsonl
copy measurement_fuzz tests/data/calibration/meas_*.jsonl tests/data/bad/calibration/meas_*.jsonl
# Hand-written seeds for inputs the repository only writes at run time (routing traces).
for d in tests/fuzz/seeds/*/; do
  copy "$(basename "$d")" "$d"*
done
for d in "$out"/*/; do
  echo "fuzz_corpus: $(basename "$d"): $(find "$d" -type f | wc -l) seeds, $(du -sk "$d" | cut -f1) KB"
done
