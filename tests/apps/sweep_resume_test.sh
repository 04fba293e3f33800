#!/usr/bin/env bash
# A sweep killed with SIGKILL part way resumes with --resume from the rows it completed and
# writes the bytes of an uninterrupted run; one stopped by SIGTERM keeps its journal and says so,
# and run again without --resume is refused (exit 2) rather than losing its rows; a journal of
# another sweep is refused (exit 2). The same for `moesim search --journal`: killed after some
# configurations, resumed, the output of an uninterrupted search; the finished journal is refused
# without --resume. The planner's tables (--plan) of the resumed runs are the uninterrupted ones',
# and a journal written with another --gpu-price-per-hour is refused.
# Usage: sweep_resume_test.sh MOESIM SWEEP.toml SCENARIO.toml SEARCH_GRID.toml
set -euo pipefail
moesim=$1
sweep=$2
scenario=$3
search_grid=$4
tmp=$(mktemp -d)
trap 'kill -9 "${pid:-0}" 2> /dev/null || true; rm -rf "$tmp"' EXIT

plan=(--gpu-price-per-hour 2)
"$moesim" sweep "$sweep" --threads 1 "${plan[@]}" --out "$tmp/ref.csv" --plan "$tmp/ref_plan.json" \
  2> /dev/null

"$moesim" sweep "$sweep" --threads 2 "${plan[@]}" --out "$tmp/out.csv" 2> /dev/null &
pid=$!
# Kill it once the journal holds the header and at least 5 rows.
for _ in $(seq 1 3000); do
  if [ -f "$tmp/out.csv.partial" ] && [ "$(wc -l < "$tmp/out.csv.partial")" -ge 6 ]; then break; fi
  sleep 0.01
done
kill -9 "$pid" 2> /dev/null || true
wait "$pid" 2> /dev/null || true
if [ -f "$tmp/out.csv" ]; then
  echo "the sweep finished before it could be killed: make the test sweep longer"
  exit 1
fi
rows=$(($(wc -l < "$tmp/out.csv.partial") - 1))
[ "$rows" -ge 5 ] || { echo "only $rows rows before the kill"; exit 1; }
# A row cut short by the kill (no newline) is dropped on resume.
printf '999,24,1,2,8' >> "$tmp/out.csv.partial"
"$moesim" sweep "$sweep" --threads 2 "${plan[@]}" --out "$tmp/out.csv" --resume \
  --plan "$tmp/out_plan.json" 2> "$tmp/resume.log"
grep -q "resumed after $rows runs" "$tmp/resume.log" || { cat "$tmp/resume.log"; exit 1; }
cmp "$tmp/ref.csv" "$tmp/out.csv"
cmp "$tmp/ref_plan.json" "$tmp/out_plan.json"

# SIGTERM part way: the journal is kept and named; without --resume it is refused (its finished
# rows would be lost), with --resume the sweep ends as an uninterrupted one.
"$moesim" sweep "$sweep" --threads 2 "${plan[@]}" --out "$tmp/term.csv" > /dev/null \
  2> "$tmp/term.log" &
pid=$!
for _ in $(seq 1 3000); do
  if [ -f "$tmp/term.csv.partial" ] && [ "$(wc -l < "$tmp/term.csv.partial")" -ge 3 ]; then break; fi
  sleep 0.01
done
set +e
kill -TERM "$pid"
wait "$pid"
code=$?
set -e
[ "$code" -eq 143 ] || { echo "SIGTERM: expected exit 143, got $code"; cat "$tmp/term.log"; exit 1; }
tail -n 1 "$tmp/term.log" | grep -qx "moesim: stopped by SIGTERM: removed 0 temporary files; $tmp/term.csv.partial keeps the finished work (--resume continues)" ||
  { cat "$tmp/term.log"; exit 1; }
cp "$tmp/term.csv.partial" "$tmp/term.before"
term_rows=$(($(grep -c '' "$tmp/term.csv.partial") - 1))
set +e
err=$("$moesim" sweep "$sweep" --threads 2 "${plan[@]}" --out "$tmp/term.csv" 2>&1 > /dev/null)
code=$?
set -e
[ "$code" -eq 2 ] || { echo "a sweep over its journal without --resume: exit $code: $err"; exit 1; }
[ "$err" = "moesim: error: $tmp/term.csv.partial: --out: holds $term_rows finished runs of an interrupted sweep: add --resume to continue it, or delete the file to start over" ] ||
  { echo "$err"; exit 1; }
cmp "$tmp/term.csv.partial" "$tmp/term.before"
"$moesim" sweep "$sweep" --threads 2 "${plan[@]}" --out "$tmp/term.csv" --resume 2> /dev/null
cmp "$tmp/ref.csv" "$tmp/term.csv"

# Rows written at another price are not resumed.
head -n 3 "$tmp/ref.csv" > "$tmp/priced.csv.partial"
set +e
err=$("$moesim" sweep "$sweep" --gpu-price-per-hour 3 --out "$tmp/priced.csv" --resume 2>&1 > /dev/null)
code=$?
set -e
[ "$code" -eq 2 ] || { echo "expected exit 2 for a journal at another price, got $code: $err"; exit 1; }
echo "$err" | grep -q "written with another --gpu-price-per-hour" || { echo "$err"; exit 1; }
[ ! -e "$tmp/out.csv.partial" ] || { echo "the journal outlived the complete CSV"; exit 1; }

# A journal from another sweep is not resumed.
echo "run_idx,num_runs,something_else" > "$tmp/other.csv.partial"
set +e
err=$("$moesim" sweep "$sweep" --out "$tmp/other.csv" --resume 2>&1 > /dev/null)
code=$?
set -e
[ "$code" -eq 2 ] || { echo "expected exit 2 for another sweep's journal, got $code: $err"; exit 1; }
echo "$err" | grep -q "not the CSV of this sweep" || { echo "$err"; exit 1; }

search=(search "$scenario" --slo ttft_p99_ms=500 --grid "$search_grid" --target-rate 5 --threads 1
        --plan "$tmp/search_plan.csv")
"$moesim" "${search[@]}" > "$tmp/search_ref.txt" 2> /dev/null
mv "$tmp/search_plan.csv" "$tmp/search_plan_ref.csv"
"$moesim" "${search[@]}" --journal "$tmp/search.jsonl" > /dev/null 2>&1 &
pid=$!
for _ in $(seq 1 3000); do
  if [ -f "$tmp/search.jsonl" ] && [ "$(wc -l < "$tmp/search.jsonl")" -ge 3 ]; then break; fi
  sleep 0.01
done
kill -9 "$pid" 2> /dev/null || true
wait "$pid" 2> /dev/null || true
configs=$(($(wc -l < "$tmp/search.jsonl") - 1))
"$moesim" "${search[@]}" --journal "$tmp/search.jsonl" --resume > "$tmp/search_resumed.txt" \
  2> "$tmp/search_resume.log"
cmp "$tmp/search_ref.txt" "$tmp/search_resumed.txt"
# The journal of a finished search is not started afresh either.
set +e
err=$("$moesim" "${search[@]}" --journal "$tmp/search.jsonl" 2>&1 > /dev/null)
code=$?
set -e
[ "$code" -eq 2 ] || { echo "a search over its journal without --resume: exit $code: $err"; exit 1; }
echo "$err" | grep -q -- "search.jsonl: --journal: holds 4 searched configurations: add --resume" ||
  { echo "$err"; exit 1; }
cmp "$tmp/search_plan_ref.csv" "$tmp/search_plan.csv"
if [ "$configs" -lt 4 ]; then
  grep -q "resumed $configs configurations" "$tmp/search_resume.log" ||
    { cat "$tmp/search_resume.log"; exit 1; }
fi
echo "sweep_resume_test: sweep killed after $rows rows and search after $configs" \
  "configurations, resumed to the uninterrupted output"
