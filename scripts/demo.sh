#!/usr/bin/env bash
# The main job of `make demo`: summaries of the default model and topology, then a simulation
# of the quick-start scenario with its outputs written to runs/quickstart/.
set -euo pipefail
build=${1:-build}
moesim="$build/apps/moesim"
echo "== moesim model show models/deepseek-v3.toml"
"$moesim" model show models/deepseek-v3.toml
echo
echo "== moesim topo show topologies/h200-node.toml"
"$moesim" topo show topologies/h200-node.toml
echo
echo "== moesim run scenarios/quickstart.toml --out runs/quickstart"
"$moesim" run scenarios/quickstart.toml --out runs/quickstart
echo
echo "outputs: runs/quickstart/{summary.json,requests.csv,trace.json,resolved/}"
echo "open runs/quickstart/trace.json in https://ui.perfetto.dev to see the per-GPU timeline"
