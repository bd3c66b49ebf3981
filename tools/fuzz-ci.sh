#!/usr/bin/env bash
# CI's fuzz stage: every libFuzzer harness for a fixed number of inputs from its seed corpus
# (tools/fuzz.sh NAME --runs N). Needs the build of tools/sanitize.sh. FUZZ_RUNS may be set.
set -euo pipefail
cd "$(dirname "$0")/.."
for name in $(tools/fuzz.sh --list); do
  # Sized for about half a minute each on the 2-core CI machine: the whole replay costs most
  # per input (a replay per policy), then the readers of large JSON files; SIZE and alloc_conf
  # are cheap.
  case "$name" in
    replay | memory_viz) runs=2000 ;;
    trace_reader | report_reader) runs=5000 ;;
    budget_file | time_profile | program) runs=20000 ;;
    *) runs=50000 ;;
  esac
  runs=${FUZZ_RUNS:-$runs}
  start=$SECONDS
  if ! out=$(tools/fuzz.sh "$name" --runs "$runs" 2>&1); then
    echo "$out" | tail -60
    echo "fuzz-ci: $name FAILED" >&2
    exit 1
  fi
  execs=$(echo "$out" | sed -n 's/^stat::number_of_executed_units: *//p')
  echo "fuzz-ci: $name: ${execs:-?} inputs in $((SECONDS - start)) s, no finding"
done
