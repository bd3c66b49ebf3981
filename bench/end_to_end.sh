#!/usr/bin/env bash
# End-to-end figures of the real binary (not Google Benchmark: they time whole processes and
# read their largest resident set with /usr/bin/time). Run by hand; see README, "Performance".
#
#   bench/end_to_end.sh BUCKETSIM [WORKDIR]
#
# 1. `compare` (three policies, the caching model) of the 1M-event trace from the file with
#    --jobs 1, 2 and every core; the other design, each worker reading its own stream, as two
#    processes splitting the policies; the 16-configuration caching sweep.
# 2. The largest resident set of that compare at 1M, 2M, 4M and 8M events, the trace streamed
#    from the generator through a pipe (nothing stored).
# Each figure is the min and median of 3 runs (the machine is shared).
set -euo pipefail
bin=$(realpath "$1")
work=${2:-$(mktemp -d)}
mkdir -p "$work"
trace=$work/t2000x24.json
[ -s "$trace" ] || "$bin" gen transformer --layers 2000 --iterations 24 -o "$trace" 2>/dev/null
policies=(--policy backward-only --policy always-allocated --policy per-group-dedup)

# min/median of 3 of "wall_s max_rss_kib" lines from /usr/bin/time.
stats() {
  sort -n | awk '{w[NR]=$1; r[NR]=$2} END {printf "wall min %.2f s median %.2f s, max RSS %d KiB\n", w[1], w[2], r[2]}'
}
timed() {
  for _ in 1 2 3; do
    /usr/bin/time -f "%e %M" -o "$work/time" "$@" >/dev/null 2>&1
    cat "$work/time"
  done | stats
}

echo "trace: $(du -m "$trace" | cut -f1) MB, $(grep -c '"ev"' "$trace") events"
for jobs in 1 2 0; do
  echo -n "compare -j$jobs (0: every core): "
  timed "$bin" compare "$trace" "${policies[@]}" -j"$jobs"
done
echo -n "compare, each worker reading its own stream (2 processes): "
timed bash -c "'$bin' compare '$trace' --policy backward-only -j1 & \
  '$bin' compare '$trace' --policy always-allocated --policy per-group-dedup -j1; wait"
echo -n "sweep, 16 configurations (4 policies x 4 caps), caching: "
timed "$bin" sweep "$trace" --bucket-cap-mb 1,5,25,100 --policy backward-only \
  --policy always-allocated --policy per-group-dedup --policy lifetime=always,key=members

for iterations in 24 48 96 192; do
  echo -n "compare, $iterations iterations ($((iterations / 24))M events) from a pipe: "
  timed bash -c "'$bin' gen transformer --layers 2000 --iterations $iterations | \
    '$bin' compare - ${policies[*]}"
done
