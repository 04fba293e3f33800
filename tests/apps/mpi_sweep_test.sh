#!/usr/bin/env bash
# `mpirun -np 2 moesim sweep`: the ranks split the runs and rank 0 writes the CSV, the same bytes
# as one process writes (and as --shard + `sweep merge`); a rank's bad output path ends the job
# with exit code 2 instead of leaving the other rank waiting; the planner's table (--plan) is one
# process's. `mpirun -np 2 moesim search` over
# the same grid prints what one process prints (text and JSON).
# Usage: mpi_sweep_test.sh MPIEXEC MOESIM SWEEP.toml SCENARIO.toml
set -euo pipefail
mpiexec=$1
moesim=$2
sweep=$3
scenario=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# CI runs as root; Open MPI refuses that unless told.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi=("$mpiexec" --oversubscribe -np 2)

"$moesim" sweep "$sweep" --out "$tmp/single.csv" --threads 1 --plan "$tmp/single_plan.json" \
  2> /dev/null
timeout 120 "${mpi[@]}" "$moesim" sweep "$sweep" --out "$tmp/mpi.csv" --threads 1 \
  --plan "$tmp/mpi_plan.json" > "$tmp/mpi.log" 2>&1 || { cat "$tmp/mpi.log"; exit 1; }
grep -q "on 2 MPI ranks" "$tmp/mpi.log" || { cat "$tmp/mpi.log"; exit 1; }
cmp "$tmp/single.csv" "$tmp/mpi.csv"
# The planner's table: rank 0 reads the merged rows, the single process's table.
cmp "$tmp/single_plan.json" "$tmp/mpi_plan.json"
# To stdout, the same bytes (only rank 0 writes).
timeout 120 "${mpi[@]}" "$moesim" sweep "$sweep" --threads 1 > "$tmp/stdout.csv" 2> /dev/null
cmp "$tmp/single.csv" "$tmp/stdout.csv"
# The job array recipe gives them too.
"$moesim" sweep "$sweep" --shard 1/2 --out "$tmp/s1.csv" --threads 1 2> /dev/null
"$moesim" sweep "$sweep" --shard 2/2 --out "$tmp/s2.csv" --threads 1 2> /dev/null
"$moesim" sweep merge "$tmp/merged.csv" "$tmp/s1.csv" "$tmp/s2.csv" 2> /dev/null
cmp "$tmp/single.csv" "$tmp/merged.csv"
# Rank 0 alone cannot write its output: the whole job ends with the bad-input code.
set +e
timeout 120 "${mpi[@]}" "$moesim" sweep "$sweep" --out "$tmp/no/such/dir/x.csv" \
  > "$tmp/bad.log" 2>&1
code=$?
set -e
if [ "$code" -ne 2 ]; then
  echo "expected exit 2 for an unwritable --out under mpirun, got $code"
  cat "$tmp/bad.log"
  exit 1
fi
grep -q "rank 0 of 2" "$tmp/bad.log" || { cat "$tmp/bad.log"; exit 1; }

search=(search "$scenario" --slo ttft_p99_ms=500 --grid "$sweep" --target-rate 5 --threads 1)
"$moesim" "${search[@]}" > "$tmp/search1.txt" 2> /dev/null
"$moesim" "${search[@]}" --json > "$tmp/search1.json" 2> /dev/null
timeout 120 "${mpi[@]}" "$moesim" "${search[@]}" > "$tmp/search2.txt" 2> /dev/null
timeout 120 "${mpi[@]}" "$moesim" "${search[@]}" --json > "$tmp/search2.json" 2> /dev/null
cmp "$tmp/search1.txt" "$tmp/search2.txt"
cmp "$tmp/search1.json" "$tmp/search2.json"
grep -q "cheapest sustaining" "$tmp/search2.txt"
echo "mpi_sweep_test: mpirun -np 2 writes the single-process CSV and search result"
