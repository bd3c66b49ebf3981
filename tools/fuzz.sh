#!/usr/bin/env bash
# Runs one libFuzzer harness (tests/fuzz/NAME_fuzz.cc) from its seed corpus (the shipped files).
#   tools/fuzz.sh NAME MINUTES   fuzz for that long; the corpus grows in build-sanitize/fuzz/corpus/NAME
#   tools/fuzz.sh NAME --runs N  exactly N inputs (tools/fuzz-ci.sh), from the seeds alone
#   tools/fuzz.sh --list         the harness names
# A crash leaves its input in build-sanitize/fuzz/crash-NAME-*; reproduce with
# build-sanitize/fuzz/fuzz_NAME FILE, then add it as a regression test in the normal suite.
# Builds the harness first (tools/sanitize.sh configures the build). SANITIZE_BUILD_DIR may be set.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${SANITIZE_BUILD_DIR:-build-sanitize}
names=(trace_reader replay memory_viz budget_file report_reader time_profile alloc_conf size program)

seeds() {
  case "$1" in
    trace_reader | replay | memory_viz)
      echo traces/*.json tests/schema/trace-bad-category.json tests/fuzz/seeds/trace/* ;;
    budget_file) echo reports/budget-example.json tests/schema/budget-bad.json ;;
    report_reader) echo tests/golden/compare-tiny-ws2*.json tests/schema/report-*.json ;;
    time_profile) echo traces/profiles/*.json ;;
    alloc_conf | size | program) echo tests/fuzz/seeds/"$1"/* ;;
  esac
}

if [[ "${1:-}" == "--list" ]]; then
  echo "${names[*]}"
  exit 0
fi
if (($# != 2 && $# != 3)) || [[ ! " ${names[*]} " == *" $1 "* ]]; then
  echo "usage: tools/fuzz.sh NAME MINUTES | tools/fuzz.sh NAME --runs N   (NAME: ${names[*]})" >&2
  exit 2
fi
name=$1
if [[ ! -f "$build_dir/build.ninja" ]]; then
  CC=clang-14 CXX=clang++-14 cmake -S . -B "$build_dir" -G Ninja -DBUCKETSIM_DEV=ON \
    -DBUCKETSIM_SANITIZE=ON -DBUCKETSIM_FUZZ=ON -DBUCKETSIM_CUDA=OFF -DBUCKETSIM_BENCH=OFF \
    -DCMAKE_BUILD_TYPE=Sanitize >/dev/null
fi
cmake --build "$build_dir" --target "fuzz_$name" >/dev/null
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

seed_dir=$(mktemp -d)
trap 'rm -rf "$seed_dir"' EXIT
# libFuzzer reads a corpus directory; the seeds are copied so the shipped files stay untouched.
for f in $(seeds "$name"); do cp "$f" "$seed_dir/$(echo "$f" | tr / _)"; done
flags=(-dict=tests/fuzz/json.dict -max_len=131072 -timeout=10 -rss_limit_mb=2048
  "-artifact_prefix=$build_dir/fuzz/crash-$name-" -print_final_stats=1)
if [[ "$2" == "--runs" ]]; then
  # A fixed number of inputs, nothing kept: the same work on every CI run.
  exec "$build_dir/fuzz/fuzz_$name" "${flags[@]}" -seed=1 -runs="$3" "$seed_dir"
fi
corpus="$build_dir/fuzz/corpus/$name"
mkdir -p "$corpus"
exec "$build_dir/fuzz/fuzz_$name" "${flags[@]}" -max_total_time=$(($2 * 60)) "$corpus" "$seed_dir"
