#!/usr/bin/env bash
# mpirun -np 2 moesim-engine replay --backend cpu: one process per rank, the all-to-alls exchanged
# through MPI. Checks that both ranks measure every op the in-process (threads) replay records,
# with the same tokens, FLOPs and bytes, and that a rank failing after MPI started ends the job
# instead of leaving the other rank waiting in a collective.
# Usage: mpi_replay_test.sh MPIEXEC MOESIM_ENGINE TRACE
set -euo pipefail
mpiexec=$1
engine=$2
trace=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# CI runs as root; Open MPI refuses that unless told.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi=("$mpiexec" --oversubscribe)
common=(--warmup 0 --repeats 1)

timeout 120 "${mpi[@]}" -np 2 "$engine" replay "$trace" --out "$tmp/mpi.{rank}.jsonl" \
  "${common[@]}" > "$tmp/mpi.log" 2>&1 || { cat "$tmp/mpi.log"; exit 1; }
grep -q "on rank 0/2 on cpu" "$tmp/mpi.log" || { cat "$tmp/mpi.log"; exit 1; }
grep -q "on rank 1/2 on cpu" "$tmp/mpi.log" || { cat "$tmp/mpi.log"; exit 1; }
"$engine" replay "$trace" --out "$tmp/threads.jsonl" --nranks 2 "${common[@]}" > /dev/null

/usr/bin/python3 - "$tmp" <<'PY'
import json, sys
tmp = sys.argv[1]
def ops(paths):
    out = {}
    for p in paths:
        for line in open(p):
            r = json.loads(line)
            if r["record"] != "op":
                continue
            key = (r["step"], r["replica"], r["sim_gpu"], r["layer"], r["op"])
            assert key not in out, f"{p}: {key} twice"
            out[key] = r
    return out
mpi = ops([f"{tmp}/mpi.0.jsonl", f"{tmp}/mpi.1.jsonl"])
threads = ops([f"{tmp}/threads.jsonl"])
assert mpi.keys() == threads.keys(), sorted(mpi.keys() ^ threads.keys())
a2a = 0
for key, t in threads.items():
    m = mpi[key]
    for field in ("tokens", "flops", "bytes", "dtype", "measured"):
        assert m[field] == t[field], f"{key} {field}: mpi {m[field]} threads {t[field]}"
    if key[4].endswith("_a2a"):
        a2a += 1
        assert m["measured"] and m["measured_ns"] > 0, f"{key}: all-to-all not measured"
assert a2a > 0, "no all-to-all records"
print(f"mpi_replay_test: {len(mpi)} op records agree, {a2a} measured all-to-alls")
PY

# Rank 1 cannot write its output after MPI started; rank 0 would wait in its first all-to-all.
set +e
timeout 120 "${mpi[@]}" -np 1 "$engine" replay "$trace" --out "$tmp/ok.{rank}.jsonl" \
  "${common[@]}" : -np 1 "$engine" replay "$trace" --out "$tmp/missing/m.{rank}.jsonl" \
  "${common[@]}" > "$tmp/fail.log" 2>&1
rc=$?
set -e
if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ]; then
  echo "a failing rank should end the job with an error (exit $rc):"
  cat "$tmp/fail.log"
  exit 1
fi
grep -q "cannot write $tmp/missing/m.1.jsonl" "$tmp/fail.log" || { cat "$tmp/fail.log"; exit 1; }
echo "mpi_replay_test: a failing rank ends the job (exit $rc)"
