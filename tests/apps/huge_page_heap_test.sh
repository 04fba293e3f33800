#!/usr/bin/env bash
# The heap's pages never change a result (base/huge_page_heap.h): a run on huge pages
# (moesim's default where the kernel's transparent huge pages are in madvise mode) and one with
# them turned off (GLIBC_TUNABLES=glibc.malloc.hugetlb=0) print the same event digest, at both
# fidelities.
# Usage: huge_page_heap_test.sh MOESIM SCENARIO.toml
set -euo pipefail
moesim=$1
scenario=$2
digest() {  # TUNABLES FIDELITY
  env ${1:+GLIBC_TUNABLES=$1} "$moesim" run "$scenario" --duration 5 --fidelity "$2" --json |
    grep -o '"event_digest": *"[0-9a-f]*"'
}
for fidelity in exact fast; do
  huge=$(unset GLIBC_TUNABLES; digest "" "$fidelity")
  small=$(digest glibc.malloc.hugetlb=0 "$fidelity")
  if [ "$huge" != "$small" ]; then
    echo "fidelity $fidelity: huge pages $huge, without $small"
    exit 1
  fi
  echo "fidelity $fidelity: $huge either way"
done
