#!/usr/bin/env bash
# The capacity-search benchmark of issue 15: times `moesim search` over the 100 configurations of
# sweeps/mooncake_capacity.toml (DeepSeek-V3 P/D on the Mooncake trace at 2x, fast fidelity) and
# prints its wall time and peak RSS. README "Speed" quotes the figure and the machine.
#
# Usage: scripts/bench_search.sh [BUILD_DIR] [THREADS] [SEARCH OPTION]...   (default: build, nproc)
# e.g. scripts/bench_search.sh build 2 --probe-infeasible (the README's figure: the search's
# diagnosis finds the SLO infeasible at any rate, so without it nothing is probed; add
# --full-probes to run every probe to its end, without early verdicts)
set -euo pipefail
build=${1:-build}
threads=${2:-$(nproc)}
shift $(( $# < 2 ? $# : 2 ))
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
cmake --build "$build" -j "$(nproc)" --target moesim >&2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
/usr/bin/time -f "%e %M" -o "$out" "$build/apps/moesim" search \
  sweeps/scenarios/mooncake_capacity.toml --grid sweeps/mooncake_capacity.toml \
  --slo ttft_p99_ms=5000,tpot_p99_ms=100 --threads "$threads" "$@" >/dev/null
read -r wall_s rss_kb < "$out"
echo "search of 100 configurations: ${wall_s} s wall, $((rss_kb / 1024)) MiB peak RSS," \
     "${threads} threads on $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
