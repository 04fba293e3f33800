#!/usr/bin/env bash
# `make bench`: builds and runs every benchmark program (bench/*_bench.cc), writes all results to
# bench/results/<date>.json (one Google Benchmark JSON per program, keyed by program, plus the
# machine) and prints a table.
#
# Usage: scripts/bench.sh [BUILD_DIR] [extra Google Benchmark flags...]
#   MIN_TIME   --benchmark_min_time per benchmark, seconds (default 0.05)
#   SIM_S      simulated seconds per scenario run in sim_speed_bench (default 10)
#   FILTER     --benchmark_filter regex applied to every program (default: all)
# Numbers are wall and CPU time on whatever machine runs this; compare CPU time on a shared box.
set -euo pipefail
build=${1:-build}
shift || true
root=$(cd "$(dirname "$0")/.." && pwd)
min_time=${MIN_TIME:-0.05}
sim_s=${SIM_S:-10}
filter=${FILTER:-.}

mapfile -t programs < <(cd "$root/bench" && ls -1 *_bench.cc | sed 's/\.cc$//' | sort)
cmake --build "$build" -j "$(nproc)" --target "${programs[@]}" >&2

out_dir="$root/bench/results"
mkdir -p "$out_dir"
stamp=$(date +%Y-%m-%d)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for p in "${programs[@]}"; do
  extra=()
  [[ $p == sim_speed_bench ]] && extra+=("--sim_s=$sim_s")
  echo "== $p" >&2
  "$build/bench/$p" --benchmark_min_time="$min_time" --benchmark_filter="$filter" \
    --benchmark_out="$tmp/$p.json" --benchmark_out_format=json "${extra[@]}" "$@" >&2
done

python3 - "$tmp" "$out_dir/$stamp.json" <<'EOF'
import json, os, platform, subprocess, sys

tmp, out_path = sys.argv[1], sys.argv[2]
results = {}
for name in sorted(os.listdir(tmp)):
    with open(os.path.join(tmp, name)) as f:
        results[name[:-len(".json")]] = json.load(f)

def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()

try:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, check=False).stdout.strip()
except OSError:
    commit = ""
doc = {"machine": {"cpu": cpu_model(), "cores": os.cpu_count(), "host": platform.node(),
                   "system": platform.platform()},
       "commit": commit, "programs": results}
with open(out_path, "w") as f:
    json.dump(doc, f, indent=2)

extra_keys = ["sim_s_per_wall_s", "wall_us_per_layer", "sim_us", "flows"]
print(f"{'benchmark':<52} {'real':>12} {'cpu':>12}  extra")
for prog, data in results.items():
    for b in data.get("benchmarks", []):
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "mean":
            continue
        unit = b.get("time_unit", "ns")
        extra = "  ".join(f"{k}={b[k]:.4g}" for k in extra_keys if k in b)
        if b.get("label"):
            extra += ("  " if extra else "") + b["label"]
        print(f"{b['name'][:52]:<52} {b['real_time']:>9.4g} {unit:<2} {b['cpu_time']:>9.4g} {unit:<2}"
              f"  {extra}")
print(f"\nmachine: {doc['machine']['cpu']} ({doc['machine']['cores']} cores); "
      f"results: {out_path}")
EOF
