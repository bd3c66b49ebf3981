#!/usr/bin/env bash
# Instructions per event of each depth bench case (bench/replay_depth_bench.cc), counted by
# callgrind inside the measured work only, on traces 12 times shorter than the timed ones
# (BUCKETSIM_BENCH_DEPTH_SCALE): for BM_ReplayDepth and BM_CheckDepth, TraceChecker::OnEvent
# (which hands each event to the replay, if any) and OnEnd; for BM_PolicyReplayDepth,
# Replay::OnEvent and OnEnd. Generating the trace, checking it ahead of a policy replay and
# copying its header, bench artifacts, are not counted. Unlike events/s, the counts do not depend
# on the load of a shared machine, so two builds compare run to run. Slow (about half a minute a
# case).
#
#   bench/instructions.sh [build/bench/bucketsim_bench] [filter regex]
set -euo pipefail
bench=${1:-build/bench/bucketsim_bench}
filter=${2:-Depth/}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
names=$("$bench" --benchmark_list_tests --benchmark_filter="$filter")
printf '%-60s %12s %10s\n' case instructions per_event
for name in $names; do
  sink=TraceChecker
  [[ $name == BM_PolicyReplayDepth/* ]] && sink=Replay
  log=$(BUCKETSIM_BENCH_DEPTH_SCALE=12 valgrind --tool=callgrind --callgrind-out-file="$out/cg" \
    --toggle-collect="bucketsim::${sink}::OnEvent*" \
    --toggle-collect="bucketsim::${sink}::OnEnd*" "$bench" --benchmark_filter="^${name}\$" 2>&1)
  instructions=$(grep -o 'Collected : [0-9]*' <<<"$log" | grep -o '[0-9]*$')
  events=$(grep -o 'events=[0-9.]*[kM]' <<<"$log" | sed 's/events=//; s/k$/e3/; s/M$/e6/')
  printf '%-60s %12s %10.1f\n' "$name" "$instructions" \
    "$(awk -v i="$instructions" -v e="$events" 'BEGIN { print i / e }')"
done
