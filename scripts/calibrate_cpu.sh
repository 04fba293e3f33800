#!/usr/bin/env bash
# The CPU calibration loop (docs/calibration.md): record -> CPU replay -> calibrate -> validate.
#   scripts/calibrate_cpu.sh BUILD_DIR [OUT_DIR]
# Records the steps of the two tiny-model workloads and of the reduced DeepSeek-V3
# (scenarios/calibration/), replays them on the CPU engine (every layer, timed repeats; a repeat
# disturbed by other processes is replaced, and the op flagged noisy when that fails: see
# docs/engine.md, "Timing on a shared machine"), then
#   1. cross-validation: fits on workload A (chat), validates on workload B (burst, held out),
#      and the reverse;
#   2. the shipped profile: fits on all three, plus the all-to-alls of a two-rank replay of chat
#      with uniform routing as its [network] section (the rank threads' exchange), writes
#      profiles/cpu-<machine>.toml and validates it on each workload (in-sample) into
#      profiles/cpu-<machine>.validation/.
# Environment: STEPS (steps recorded per tiny workload, default 60), REPEATS (default 7),
# SLICE_STEPS (steps of the DeepSeek-V3 slice, default 8; 0 leaves it out), SLICE_REPEATS
# (default 2, no warmup run and no retries of disturbed repeats: each of its ops converts
# DeepSeek-V3-sized BF16 weights to FP32, 0.4-0.8 s per op on one thread, so its replay costs
# ~13 s of CPU per step and GPU; its disturbed ops are flagged, not re-run), MACHINE (profile suffix,
# default the CPU model, lower-case, dashes), PROFILE_DIR (where the profile and its reports go,
# default profiles).
set -euo pipefail
BUILD=${1:?usage: scripts/calibrate_cpu.sh BUILD_DIR [OUT_DIR]}
OUT=${2:-$BUILD/calibration}
STEPS=${STEPS:-60}
REPEATS=${REPEATS:-7}
SLICE_STEPS=${SLICE_STEPS:-8}
SLICE_REPEATS=${SLICE_REPEATS:-2}
PROFILE_DIR=${PROFILE_DIR:-profiles}
MOESIM=$BUILD/apps/moesim
ENGINE=$BUILD/engine/moesim-engine
if [[ -z "${MACHINE:-}" ]]; then
  MACHINE=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1 |
            tr 'A-Z' 'a-z' | sed -e 's/([^)]*)//g' -e 's/[^a-z0-9]\+/-/g' -e 's/^-//' -e 's/-$//' |
            cut -c1-40)
fi
mkdir -p "$OUT" "$PROFILE_DIR"

# One engine thread: the CPU backend then times ops by the thread's CPU time, so the time the
# replay spends preempted on the shared two-core machine is not counted (engine/cpu/cpu_backend.h).
export OMP_NUM_THREADS=1

for w in chat burst; do
  "$MOESIM" run scenarios/calibration/tiny-cpu-$w.toml --record "$OUT/$w.steps.jsonl" \
      --record-steps "$STEPS" > "$OUT/$w.run.txt"
done
if (( SLICE_STEPS > 0 )); then
  "$MOESIM" run scenarios/calibration/dsv3-slice-cpu.toml --record "$OUT/slice.steps.jsonl" \
      --record-steps "$SLICE_STEPS" > "$OUT/slice.run.txt"
fi
# The two replays run at the same time, so that both workloads are measured under the same
# machine conditions: on a shared machine the load (other processes on the same cores and
# caches) drifts between sequential runs by ~10%, which would read as an out-of-sample error.
# The slice's replay (the longest, a few minutes) runs beside them; it is fitted and validated in
# sample only.
pids=()
for w in chat burst; do
  "$ENGINE" replay "$OUT/$w.steps.jsonl" --out "$OUT/$w.meas.jsonl" --backend cpu \
      --layers all --warmup 2 --repeats "$REPEATS" > "$OUT/$w.replay.txt" &
  pids+=($!)
done
if (( SLICE_STEPS > 0 )); then
  "$ENGINE" replay "$OUT/slice.steps.jsonl" --out "$OUT/slice.meas.jsonl" --backend cpu \
      --layers all --warmup 0 --repeats "$SLICE_REPEATS" --retries 0 > "$OUT/slice.replay.txt" &
  pids+=($!)
fi
for p in "${pids[@]}"; do wait "$p"; done

# The all-to-alls of two in-process ranks (the "fabric" of tiny-cpu and the serving scenarios:
# two rank threads exchanging rows in shared memory, their barriers included), for the profile's
# [network] fit: chat's traffic with uniform routing (the network fit reads each exchange as a
# uniform one), replayed by two ranks after the others, since it needs both cores.
"$MOESIM" run scenarios/calibration/tiny-cpu-chat.toml --set routing.preset=uniform \
    --record "$OUT/a2a.steps.jsonl" --record-steps "$STEPS" > "$OUT/a2a.run.txt"
"$ENGINE" replay "$OUT/a2a.steps.jsonl" --out "$OUT/a2a.meas.jsonl" --backend cpu --nranks 2 \
    --layers all --warmup 2 --repeats "$REPEATS" > "$OUT/a2a.replay.txt"
# Only the exchanges: the ops of that replay ran beside the other rank's, not alone like the
# fitted workloads' (the writer starts every line with its "record" key).
grep -E '^\{"record":"header"|^\{"record":"op",.*"op":"(dispatch|combine)_a2a"' \
    "$OUT/a2a.meas.jsonl" > "$OUT/a2a-only.meas.jsonl"

# 1. Cross-validation (out of sample).
"$MOESIM" calibrate "$OUT/chat.meas.jsonl" --out "$OUT/fit-chat.toml" --name fit-chat
"$MOESIM" validate scenarios/calibration/tiny-cpu-burst.toml --profile "$OUT/fit-chat.toml" \
    --measurements "$OUT/burst.meas.jsonl" --out "$OUT/xval-chat-to-burst"
"$MOESIM" calibrate "$OUT/burst.meas.jsonl" --out "$OUT/fit-burst.toml" --name fit-burst
"$MOESIM" validate scenarios/calibration/tiny-cpu-chat.toml --profile "$OUT/fit-burst.toml" \
    --measurements "$OUT/chat.meas.jsonl" --out "$OUT/xval-burst-to-chat"

# 2. The shipped profile, fitted on every workload.
PROFILE=$PROFILE_DIR/cpu-$MACHINE.toml
REPORT=$PROFILE_DIR/cpu-$MACHINE.validation
fitted=("$OUT/chat.meas.jsonl" "$OUT/burst.meas.jsonl" "$OUT/a2a-only.meas.jsonl")
if (( SLICE_STEPS > 0 )); then fitted+=("$OUT/slice.meas.jsonl"); fi
"$MOESIM" calibrate "${fitted[@]}" --out "$PROFILE" --name "cpu-$MACHINE" \
    --topology topologies/cpu-2.toml > "$OUT/calibrate.txt"
cat "$OUT/calibrate.txt"
mkdir -p "$REPORT"
for w in chat burst; do
  "$MOESIM" validate scenarios/calibration/tiny-cpu-$w.toml --profile "$PROFILE" \
      --measurements "$OUT/$w.meas.jsonl" --out "$REPORT/in-sample-$w"
done
rm -rf "${REPORT:?}/in-sample-slice"
if (( SLICE_STEPS > 0 )); then
  "$MOESIM" validate scenarios/calibration/dsv3-slice-cpu.toml --profile "$PROFILE" \
      --measurements "$OUT/slice.meas.jsonl" --out "$REPORT/in-sample-slice"
fi
for d in xval-chat-to-burst xval-burst-to-chat; do
  rm -rf "${REPORT:?}/$d"
  cp -r "$OUT/$d" "$REPORT/$d"
done
echo "profile: $PROFILE; reports: $REPORT/"
