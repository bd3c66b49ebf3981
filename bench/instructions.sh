#!/usr/bin/env bash
# Instructions per event of each BM_ReplayDepth case, counted by callgrind inside the checked
# replay only (TraceChecker::OnEvent, which hands each event to the replay, and OnEnd; generating
# the trace and copying its header, bench artifacts, are not counted), on traces 12 times shorter than
# the timed ones (BUCKETSIM_BENCH_DEPTH_SCALE). Unlike events/s, the counts do not depend on the
# load of a shared machine, so two builds compare run to run. Slow (about half a minute a case).
#
#   bench/instructions.sh [build/bench/bucketsim_bench] [filter regex]
set -euo pipefail
bench=${1:-build/bench/bucketsim_bench}
filter=${2:-BM_ReplayDepth}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
names=$("$bench" --benchmark_list_tests --benchmark_filter="$filter")
printf '%-60s %12s %10s\n' case instructions per_event
for name in $names; do
  log=$(BUCKETSIM_BENCH_DEPTH_SCALE=12 valgrind --tool=callgrind --callgrind-out-file="$out/cg" \
    --toggle-collect='bucketsim::TraceChecker::OnEvent*' \
    --toggle-collect='bucketsim::TraceChecker::OnEnd*' "$bench" --benchmark_filter="^${name}\$" 2>&1)
  instructions=$(grep -o 'Collected : [0-9]*' <<<"$log" | grep -o '[0-9]*$')
  events=$(grep -o 'events=[0-9.]*[kM]' <<<"$log" | sed 's/events=//; s/k$/e3/; s/M$/e6/')
  printf '%-60s %12s %10.1f\n' "$name" "$instructions" \
    "$(awk -v i="$instructions" -v e="$events" 'BEGIN { print i / e }')"
done
