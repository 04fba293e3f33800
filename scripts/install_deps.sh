#!/usr/bin/env bash
# Installs the Debian packages moesim needs. `install_deps.sh` installs all of them (build, tests,
# benchmarks, notebooks, the Python module; clang-14 and its compiler-rt, which ships libFuzzer,
# for the sanitizer build and make fuzz; universal-ctags for the structure test; python3-tomli-w
# for scripts/fidelity_report.py); `install_deps.sh demo` only what building the `moesim` binary
# needs (make demo). ccache is in both: the build uses it when present.
# Idempotent: when all packages are present it changes nothing and installs nothing.
# CUDA 13 (nvcc, cuBLAS, NCCL) is expected from the machine image, not from apt.
set -euo pipefail
demo_packages=(
  build-essential cmake pkg-config ccache
  libsimgrid-dev libeigen3-dev libboost-graph-dev libtomlplusplus-dev nlohmann-json3-dev
)
packages=(
  "${demo_packages[@]}"
  clang-14 libclang-rt-14-dev
  libgtest-dev googletest libbenchmark-dev libopenmpi-dev openmpi-bin libcli11-dev
  jupyter-nbconvert python3-ipykernel python3-nbclient python3-matplotlib python3-pandas
  chromium python3-dev pybind11-dev python3-pytest python3-tomli-w universal-ctags
)
case "${1:-all}" in
  all) ;;
  demo) packages=("${demo_packages[@]}") ;;
  *) echo "usage: $0 [all|demo]" >&2; exit 2 ;;
esac
missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install_deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y --no-install-recommends "${missing[@]}"
