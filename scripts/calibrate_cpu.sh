#!/usr/bin/env bash
# The CPU calibration loop (docs/calibration.md): record -> CPU replay -> calibrate -> validate.
#   scripts/calibrate_cpu.sh BUILD_DIR [OUT_DIR]
# Records the steps of the two tiny-model workloads (scenarios/calibration/), replays them on the
# CPU engine (every layer, 7 timed repeats, median), then
#   1. cross-validation: fits on workload A (chat), validates on workload B (burst, held out),
#      and the reverse;
#   2. the shipped profile: fits on both, writes profiles/cpu-<machine>.toml and validates it on
#      each workload (in-sample) into profiles/cpu-<machine>.validation/.
# Environment: STEPS (steps recorded per workload, default 60), REPEATS (default 7),
# MACHINE (profile suffix, default the CPU model, lower-case, dashes), PROFILE_DIR (where the
# profile and its reports go, default profiles).
set -euo pipefail
BUILD=${1:?usage: scripts/calibrate_cpu.sh BUILD_DIR [OUT_DIR]}
OUT=${2:-$BUILD/calibration}
STEPS=${STEPS:-60}
REPEATS=${REPEATS:-7}
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
# The two replays run at the same time, so that both workloads are measured under the same
# machine conditions: on a shared machine the load (other processes on the same cores and
# caches) drifts between sequential runs by ~10%, which would read as an out-of-sample error.
pids=()
for w in chat burst; do
  "$ENGINE" replay "$OUT/$w.steps.jsonl" --out "$OUT/$w.meas.jsonl" --backend cpu \
      --layers all --warmup 2 --repeats "$REPEATS" > "$OUT/$w.replay.txt" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done

# 1. Cross-validation (out of sample).
"$MOESIM" calibrate "$OUT/chat.meas.jsonl" -o "$OUT/fit-chat.toml" --name fit-chat
"$MOESIM" validate scenarios/calibration/tiny-cpu-burst.toml --profile "$OUT/fit-chat.toml" \
    --measurements "$OUT/burst.meas.jsonl" --out "$OUT/xval-chat-to-burst"
"$MOESIM" calibrate "$OUT/burst.meas.jsonl" -o "$OUT/fit-burst.toml" --name fit-burst
"$MOESIM" validate scenarios/calibration/tiny-cpu-chat.toml --profile "$OUT/fit-burst.toml" \
    --measurements "$OUT/chat.meas.jsonl" --out "$OUT/xval-burst-to-chat"

# 2. The shipped profile, fitted on both workloads.
PROFILE=$PROFILE_DIR/cpu-$MACHINE.toml
REPORT=$PROFILE_DIR/cpu-$MACHINE.validation
"$MOESIM" calibrate "$OUT/chat.meas.jsonl" "$OUT/burst.meas.jsonl" -o "$PROFILE" \
    --name "cpu-$MACHINE"
mkdir -p "$REPORT"
for w in chat burst; do
  "$MOESIM" validate scenarios/calibration/tiny-cpu-$w.toml --profile "$PROFILE" \
      --measurements "$OUT/$w.meas.jsonl" --out "$REPORT/in-sample-$w"
done
for d in xval-chat-to-burst xval-burst-to-chat; do
  rm -rf "${REPORT:?}/$d"
  cp -r "$OUT/$d" "$REPORT/$d"
done
echo "profile: $PROFILE; reports: $REPORT/"
