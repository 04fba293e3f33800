#!/usr/bin/env bash
# `moesim search` writes the same bytes whatever --threads says (docs/sweeps.md, "The search"):
# - one configuration, whose probes run speculatively on the spare threads: text, --json, --plan
#   and --journal of --threads 3 are those of --threads 1;
# - a grid of 4 configurations on 8 threads (2 probe threads each);
# - a grid search resumed from a journal holding 3 of its 4 configurations, the last searched on
#   3 threads: the uninterrupted output.
# Usage: search_threads_test.sh MOESIM SCENARIO.toml GRID.toml
set -euo pipefail
moesim=$1
scenario=$2
grid=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

one=(search "$scenario" --slo ttft_p99_ms=150,attainment=0.9 --gpu-price-per-hour 2)
for t in 1 3; do
  # In a directory of its own: the text names the plan's file.
  mkdir "$tmp/t$t"
  (cd "$tmp/t$t" && "$moesim" "${one[@]}" --threads "$t" --plan plan.csv --journal journal.jsonl \
    > one.txt 2> /dev/null)
  "$moesim" "${one[@]}" --threads "$t" --json > "$tmp/t$t/one.json" 2> /dev/null
done
for f in one.txt one.json plan.csv journal.jsonl; do cmp "$tmp/t1/$f" "$tmp/t3/$f"; done
# Enough probes in a row for the speculation to overlap some (the search doubles to 64 and then
# bisects).
probes=$(grep -o '"multiplier"' "$tmp/t1/one.json" | wc -l)
if [ "$probes" -lt 8 ]; then
  echo "only $probes probes: the test no longer exercises speculative probes"
  exit 1
fi

search=(search "$scenario" --slo ttft_p99_ms=500 --grid "$grid" --target-rate 5)
"$moesim" "${search[@]}" --threads 1 --journal "$tmp/grid.jsonl" > "$tmp/grid1.txt" 2> /dev/null
"$moesim" "${search[@]}" --threads 8 > "$tmp/grid8.txt" 2> /dev/null
cmp "$tmp/grid1.txt" "$tmp/grid8.txt"
# The header and the first 3 configurations, as a search killed before the last one leaves it.
head -n 4 "$tmp/grid.jsonl" > "$tmp/resume.jsonl"
"$moesim" "${search[@]}" --threads 3 --journal "$tmp/resume.jsonl" --resume \
  > "$tmp/resumed.txt" 2> "$tmp/resume.log"
cmp "$tmp/grid1.txt" "$tmp/resumed.txt"
cmp "$tmp/grid.jsonl" "$tmp/resume.jsonl"
grep -q "resumed 3 configurations" "$tmp/resume.log" || { cat "$tmp/resume.log"; exit 1; }
echo "search_threads_test: one configuration ($probes probes) and a grid, the same bytes on 1, 3" \
  "and 8 threads"
