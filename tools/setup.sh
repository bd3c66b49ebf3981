#!/usr/bin/env bash
# Installs the Debian packages bucketsim needs. As root it runs apt-get; otherwise it prints the
# exact command to run and fails.
#
#   tools/setup.sh tool   what building and running the bucketsim binary needs (tools/compare.sh,
#                         and a CI job that only gates on budgets)
#   tools/setup.sh [test] that, and what the whole test suite needs (tools/test.sh):
#                         Google Test and Benchmark; python3-jsonschema and libxml2-utils (xmllint)
#                         for the schema tests; chromium for the browser test of the HTML report
#                         (tests/report/browser_test.py); python3-torch (CPU) to run real PyTorch
#                         as the oracle (tests/tools: the recorder, DDP against the ddp policy);
#                         clang-14 with its runtime libraries for the sanitizer and libFuzzer
#                         builds (tools/sanitize.sh, tools/fuzz*.sh).
#
# CUDA and NCCL are optional and not installed here: where nvcc and NCCL are present the CUDA
# backend is built as well. openmpi-bin comes with the tool: `bucketsim run --backend mpi` runs
# under its mpirun, and CMake finds MPI through its compiler wrapper.
set -euo pipefail

profile=${1:-test}
tool_packages=(
  cmake ninja-build g++ pkg-config
  nlohmann-json3-dev libcli11-dev libfmt-dev
  libopenmpi-dev openmpi-bin
)
test_packages=(
  libgtest-dev libbenchmark-dev
  python3 python3-jsonschema python3-torch
  chromium
  libxml2-utils
  clang-14 libclang-rt-14-dev
)
case "$profile" in
  tool) packages=("${tool_packages[@]}") ;;
  test) packages=("${tool_packages[@]}" "${test_packages[@]}") ;;
  *)
    echo "setup: unknown profile '$profile' (expected: tool, test)" >&2
    exit 2
    ;;
esac

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} packages for '$profile' present"
  exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
  echo "setup: missing packages: ${missing[*]}" >&2
  echo "setup: run as root:  apt-get update && apt-get install -y ${missing[*]}" >&2
  exit 1
fi

echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
