#!/usr/bin/env bash
# Installs the Debian packages bucketsim needs to build and test. As root it runs apt-get;
# otherwise it prints the exact command to run and fails. chromium is for the browser test of
# the HTML report (tests/report/browser_test.py); clang-14 with its runtime libraries is for the
# sanitizer and libFuzzer build (tools/sanitize.sh, tools/fuzz*.sh). CUDA and NCCL are optional and not
# installed here: where nvcc and NCCL are present the CUDA backend is built as well.
set -euo pipefail

packages=(
  cmake ninja-build g++ pkg-config
  nlohmann-json3-dev libcli11-dev libfmt-dev
  libgtest-dev libbenchmark-dev
  libopenmpi-dev openmpi-bin
  python3 python3-jsonschema python3-torch
  chromium
  libxml2-utils
  clang-14 libclang-rt-14-dev
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} packages present"
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
