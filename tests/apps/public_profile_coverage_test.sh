#!/bin/bash
# Every shipped scenario priced with a public profile (profiles/h800-public.toml or a profile
# derived from it) prices every op inside a fitted range or by a stated rule: `moesim run` over
# a short window reports no out-of-range cost queries (docs/calibration.md, "Where no fit
# applies"). A scenario whose batches leave the fitted ranges without a rule fails here, naming
# the op kinds.
# usage: public_profile_coverage_test.sh MOESIM SOURCE_DIR
set -u
moesim=$1
src=$2
cd "$src" || exit 1
num=0
failed=0
for sc in $(grep -rlE --include='*.toml' 'profiles/(h800-public|h100-derived|h200-derived)\.toml' \
  scenarios | sort); do
  num=$((num + 1))
  line=$("$moesim" run "$sc" --duration 2 --seed 1 --json | /usr/bin/python3 -c '
import json, sys
c = json.load(sys.stdin)["counters"]
print(c["cost_out_of_range_queries"], c["cost_by_rule_queries"], c["steps"],
      json.dumps(c["cost_out_of_range_by_kind"], sort_keys=True))')
  [ -n "$line" ] || { echo "FAIL: $sc: no summary"; failed=1; continue; }
  read -r out by_rule steps kinds <<<"$line"
  echo "$sc: $steps steps, $out out of range, $by_rule by rule"
  [ "$steps" -gt 0 ] || { echo "FAIL: $sc: no step ran"; failed=1; }
  if [ "$out" -ne 0 ]; then
    echo "FAIL: $sc: $out cost queries outside the fitted ranges with no rule: $kinds"
    failed=1
  fi
done
[ "$num" -gt 0 ] || { echo "FAIL: no scenario uses a public profile"; exit 1; }
exit $failed
