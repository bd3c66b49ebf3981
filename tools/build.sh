#!/usr/bin/env bash
# Configures and builds bucketsim in developer mode (warnings are errors) into build/.
# BUILD_DIR and CMAKE_BUILD_TYPE may be set in the environment.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
# ccache where it is installed: rebuilds, and builds of other checkouts of the same sources (git
# worktrees), reuse the objects; paths are taken relative to the checkout so that they can.
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
fi
cmake -S . -B "$build_dir" -G Ninja -DBUCKETSIM_DEV=ON "${launcher[@]}" \
  -DCMAKE_BUILD_TYPE="${CMAKE_BUILD_TYPE:-RelWithDebInfo}"
cmake --build "$build_dir" -j "$(nproc)"
