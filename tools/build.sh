#!/usr/bin/env bash
# Configures and builds bucketsim in developer mode (warnings are errors) into build/.
# BUILD_DIR and CMAKE_BUILD_TYPE may be set in the environment.
#
#   tools/build.sh tool   the bucketsim binary only. A build directory configured here for the
#                         first time leaves the tests and benchmarks out (Google Test and
#                         Benchmark need not be installed: tools/setup.sh tool); one configured
#                         before keeps what it has.
#   tools/build.sh [all]  everything: the binary, the tests, the benchmarks.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
what=${1:-all}
options=()
targets=()
case "$what" in
  all) options=(-DBUCKETSIM_TESTS=ON -DBUCKETSIM_BENCH=ON) ;;
  tool)
    [[ -f "$build_dir/CMakeCache.txt" ]] || options=(-DBUCKETSIM_TESTS=OFF -DBUCKETSIM_BENCH=OFF)
    targets=(--target bucketsim)
    ;;
  *)
    echo "build: unknown target set '$what' (expected: tool, all)" >&2
    exit 2
    ;;
esac
# ccache where it is installed: rebuilds, and builds of other checkouts of the same sources (git
# worktrees), reuse the objects; paths are taken relative to the checkout so that they can.
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
fi
cmake -S . -B "$build_dir" -G Ninja -DBUCKETSIM_DEV=ON "${launcher[@]}" "${options[@]}" \
  -DCMAKE_BUILD_TYPE="${CMAKE_BUILD_TYPE:-RelWithDebInfo}"
cmake --build "$build_dir" -j "$(nproc)" "${targets[@]}"
