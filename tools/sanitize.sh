#!/usr/bin/env bash
# The whole suite, MPI tests included, under AddressSanitizer + UndefinedBehaviorSanitizer
# (docs/development.md, "Development"). Builds into build-sanitize/ with clang 14 (-DBUCKETSIM_SANITIZE=ON,
# plus the libFuzzer harnesses that tools/fuzz-ci.sh runs from the same build). The CUDA backend
# is not part of this build (-DBUCKETSIM_CUDA=OFF): nvcc's host code is not instrumented.
# Leaks inside Open MPI are suppressed by tests/sanitizers/lsan.supp; anything else fails.
# The tests labelled oracle (real PyTorch as the reference: their time is torch's, and their
# figures are the plain build's) are left out; BoundedMemory measures the plain build's RSS.
# SANITIZE_BUILD_DIR may be set in the environment.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${SANITIZE_BUILD_DIR:-build-sanitize}
CC=clang-14 CXX=clang++-14 cmake -S . -B "$build_dir" -G Ninja -DBUCKETSIM_DEV=ON \
  -DBUCKETSIM_SANITIZE=ON -DBUCKETSIM_FUZZ=ON -DBUCKETSIM_CUDA=OFF -DBUCKETSIM_BENCH=OFF \
  -DCMAKE_BUILD_TYPE=Sanitize >/dev/null
cmake --build "$build_dir" -j "$(nproc)"
# fast_unwind_on_malloc=0: Open MPI's libraries have no frame pointers, and the fast unwinder
# stops at their first frame, so a leak inside them would not name them; and Open MPI and PMIx
# must keep their plugins loaded to the end (their documented parameter for valgrind and ASan),
# or a leak inside an unloaded plugin shows as "<unknown module>". Both so that
# tests/sanitizers/lsan.supp can name the library, and nothing else is suppressed.
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1:fast_unwind_on_malloc=0"
export LSAN_OPTIONS="suppressions=$PWD/tests/sanitizers/lsan.supp:print_suppressions=0"
export OMPI_MCA_mca_base_component_disable_dlclose=1 PMIX_MCA_mca_base_component_disable_dlclose=1
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# BoundedMemory measures the process rather than checks it, and the normal build runs it: it
# asserts a 64 MiB resident set over 10M events (AddressSanitizer's shadow memory
# and quarantine of freed blocks put a sanitized compare at about 360 MiB, and each such test
# takes about 2 minutes here).
# Tools.RecordProgram and Tools.RecordProgramTorch2 are the recorder's Python suite under torch
# 1.13 and 2.6 (9 min together here); the binary they touch is checked under the sanitizers by
# every other test, so the normal build runs them alone.
ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)" \
  -E '^BoundedMemory\.' -LE oracle "$@"
