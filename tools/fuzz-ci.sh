#!/usr/bin/env bash
# CI's fuzz stage: every libFuzzer harness for a fixed number of inputs from its seed corpus
# (tools/fuzz.sh NAME --runs N). Needs the build of tools/sanitize.sh. FUZZ_RUNS may be set.
set -euo pipefail
cd "$(dirname "$0")/.."
for name in $(tools/fuzz.sh --list); do
  # The whole replay costs most per input (a replay per policy); the parsers are cheap.
  case "$name" in
    replay | trace_reader) runs=${FUZZ_RUNS:-20000} ;;
    *) runs=${FUZZ_RUNS:-50000} ;;
  esac
  start=$SECONDS
  if ! out=$(tools/fuzz.sh "$name" --runs "$runs" 2>&1); then
    echo "$out" | tail -60
    echo "fuzz-ci: $name FAILED" >&2
    exit 1
  fi
  execs=$(echo "$out" | sed -n 's/^stat::number_of_executed_units: *//p')
  echo "fuzz-ci: $name: ${execs:-?} inputs in $((SECONDS - start)) s, no finding"
done
