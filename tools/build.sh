#!/usr/bin/env bash
# Configures and builds bucketsim in developer mode (warnings are errors) into build/.
# BUILD_DIR and CMAKE_BUILD_TYPE may be set in the environment.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
cmake -S . -B "$build_dir" -G Ninja -DBUCKETSIM_DEV=ON \
  -DCMAKE_BUILD_TYPE="${CMAKE_BUILD_TYPE:-RelWithDebInfo}"
cmake --build "$build_dir" -j "$(nproc)"
