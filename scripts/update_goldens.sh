#!/usr/bin/env bash
# Regenerates tests/golden/digests.txt from the current build: every shipped scenario, run for
# the duration already listed there (default 10 simulated seconds for new scenarios), seed 1,
# on the exact fidelity and on the fast fidelity (--fidelity fast; docs/fast_fidelity.md).
set -euo pipefail
build=${1:-build}
out=tests/golden/digests.txt
declare -A dur
if [ -f "$out" ]; then
  while read -r path d seed digest fast; do
    [[ -z "$path" || "$path" == \#* ]] && continue
    dur[$path]=$d
  done < "$out"
fi
tmp=$(mktemp)
head -4 "$out" > "$tmp"
for f in $(find scenarios -name '*.toml' | sort); do
  d=${dur[$f]:-10}
  digest_of() {
    "$build/apps/moesim" run "$f" --duration "$d" --seed 1 --json "$@" | \
      /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["event_digest"])'
  }
  echo "$f $d 1 $(digest_of) $(digest_of --fidelity fast)" >> "$tmp"
done
mv "$tmp" "$out"
cat "$out"
