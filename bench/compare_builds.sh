#!/usr/bin/env bash
# Two builds' Google Benchmark figures measured in one run, so that their ratio means something on
# a shared, noisy machine: the two bench binaries run alternately, ROUNDS times each (default 3),
# and each benchmark's items_per_second (M/s) is printed as min and median for both.
#
#   bench/compare_builds.sh BASE_BENCH NEW_BENCH FILTER [ROUNDS]
#   bench/compare_builds.sh /tmp/base/build/bench/bucketsim_bench build/bench/bucketsim_bench 'Depth/'
set -euo pipefail
base=$1 new=$2 filter=$3 rounds=${4:-3}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for _ in $(seq "$rounds"); do
  for tag in base new; do
    bin=$new
    [[ $tag == base ]] && bin=$base
    "$bin" --benchmark_filter="$filter" 2>/dev/null | awk -v tag="$tag" '/^BM_/ {
      for (i = 1; i <= NF; i++) if ($i ~ /^items_per_second=/) {
        value = $i; sub("items_per_second=", "", value); sub("/s$", "", value)
        scale = 1
        if (value ~ /M$/) scale = 1; else if (value ~ /k$/) scale = 1e-3; else if (value ~ /G$/) scale = 1e3; else scale = 1e-6
        sub("[kMG]$", "", value)
        name = $1; sub("/iterations:[0-9]+$", "", name)
        print tag, name, value * scale
      }
    }' >>"$out"
  done
done
python3 - "$out" <<'PY'
import collections, statistics, sys
figures = collections.defaultdict(list)
for line in open(sys.argv[1]):
    tag, name, value = line.split()
    figures[(name, tag)].append(float(value))
for name in sorted({name for name, _ in figures}):
    cells = []
    for tag in ("base", "new"):
        values = figures.get((name, tag), [])
        cells.append(f"{tag} min {min(values):.2f} median {statistics.median(values):.2f}"
                     if values else f"{tag} -")
    print(f"{name} | {' | '.join(cells)}")
PY
