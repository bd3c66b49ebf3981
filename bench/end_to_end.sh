#!/usr/bin/env bash
# End-to-end figures of the real binary (not Google Benchmark: they time whole processes and
# read their largest resident set with /usr/bin/time). Run by hand; see docs/development.md, "Performance".
#
#   bench/end_to_end.sh BUILD_DIR [WORKDIR]     (BUILD_DIR holds bucketsim and bench/)
#
# 1. The issue-14 targets on the 1M-event trace (gen transformer --layers 2000 --iterations 4:
#    990,284 events, 64 MB): nlohmann's SAX parser parsing the file and doing nothing
#    (bench/sax_parse.cc), against `compare` (three policies, the caching model) with --jobs 1
#    and 2; `check` of one policy with -j1 and -j2 (a CI gate: with two threads the replay runs
#    beside the reading and checking); the other design, each worker reading its own stream, as
#    two processes splitting the policies; the 16-configuration caching sweep.
# 2. The largest resident set of compare, check, validate and a 4-configuration sweep at 1M, 2M,
#    4M and 8M events of the same model, the trace streamed from the generator through a pipe
#    (nothing stored; only the command's own process is measured).
# 3. A sweep of two traces (the 1M-event trace at world sizes 8 and 4), 7 configurations each:
#    one process with -j1 and -j2, and under `mpirun -np 2` (-j1 per rank), which spreads the
#    (trace, configuration) pairs over the ranks.
# Timed figures are the min and median of 3 runs, wall and CPU (user + system) time, each line
# with the load average before it (the machine is shared).
set -euo pipefail
build=$(realpath "$1")
bin=$build/bucketsim
sax=$build/bench/bucketsim_sax_parse
work=${2:-$(mktemp -d)}
mkdir -p "$work"
trace=$work/t2000x4.json
[ -s "$trace" ] || "$bin" gen transformer --layers 2000 --iterations 4 -o "$trace" 2>/dev/null
policies=(--policy backward-only --policy always-allocated --policy per-group-dedup)

load() { cut -d' ' -f1-3 /proc/loadavg; }
# min/median of 3 "wall_s cpu_s max_rss_kib" lines.
stats() {
  local lines walls cpus
  lines=$(cat)
  walls=($(cut -d' ' -f1 <<<"$lines" | sort -n))
  cpus=($(cut -d' ' -f2 <<<"$lines" | sort -n))
  printf "wall min %s median %s s, cpu min %s median %s s, max RSS %s KiB" "${walls[0]}" \
    "${walls[1]}" "${cpus[0]}" "${cpus[1]}" "$(cut -d' ' -f3 <<<"$lines" | sort -n | tail -1)"
}
timed() {
  local before
  before=$(load)
  for _ in 1 2 3; do
    /usr/bin/time -f "%e %U %S %M" -o "$work/time" "$@" >/dev/null 2>&1
    awk '{print $1, $2 + $3, $4}' "$work/time"
  done | stats
  echo "  (load before: $before)"
}

echo "trace: $(du -m "$trace" | cut -f1) MB, $(grep -c '"ev"' "$trace") events"
echo -n "nlohmann SAX parse, doing nothing: "
timed "$sax" "$trace"
for jobs in 1 2; do
  echo -n "compare -j$jobs: "
  timed "$bin" compare "$trace" "${policies[@]}" -j"$jobs"
done
for jobs in 1 2; do
  echo -n "check, one policy with a budget, -j$jobs: "
  timed "$bin" check "$trace" --policy backward-only --max-peak-reserved 10000GiB -j"$jobs"
done
echo -n "compare, each worker reading its own stream (2 processes): "
timed bash -c "'$bin' compare '$trace' --policy backward-only -j1 & \
  '$bin' compare '$trace' --policy always-allocated --policy per-group-dedup -j1; wait"
echo -n "sweep, 16 configurations (4 policies x 4 caps), caching: "
timed "$bin" sweep "$trace" --bucket-cap-mb 1,5,25,100 --policy backward-only \
  --policy always-allocated --policy per-group-dedup --policy lifetime=always,key=members

# The largest resident set of the command alone (time wraps only the reading end of the pipe).
rss() {
  local iterations=$1
  shift
  "$bin" gen transformer --layers 2000 --iterations "$iterations" 2>/dev/null |
    /usr/bin/time -f "%M" -o "$work/rss" "$bin" "$@" >/dev/null 2>&1
  cat "$work/rss"
}
echo "max RSS (KiB), trace from a pipe (load before: $(load)):"
echo "iterations events compare check validate sweep4"
for iterations in 4 8 16 32; do
  echo "$iterations $((iterations * 246069 + 6008)) $(rss "$iterations" compare - "${policies[@]}") \
$(rss "$iterations" check - --policy backward-only --max-peak-reserved 1000GiB) \
$(rss "$iterations" validate -) \
$(rss "$iterations" sweep - --bucket-cap-mb 5,25 --policy backward-only --policy always-allocated)"
done

trace4=$work/t2000x4-ws4.json
[ -s "$trace4" ] || "$bin" gen transformer --layers 2000 --iterations 4 --world-size 4 \
  -o "$trace4" 2>/dev/null
two=(sweep "$trace" "$trace4" --bucket-cap-mb 5,25 --quiet)
mpirun=(mpirun --oversubscribe -np 2)
[ "$(id -u)" = 0 ] && mpirun+=(--allow-run-as-root)
for jobs in 1 2; do
  echo -n "sweep of two traces, 7 configurations each, -j$jobs: "
  timed "$bin" "${two[@]}" -j"$jobs"
done
echo -n "sweep of two traces, 7 configurations each, mpirun -np 2 (-j1 per rank): "
timed "${mpirun[@]}" "$bin" "${two[@]}" -j1
