#!/usr/bin/env bash
# How far the time model's prediction is from a real replay on this machine (docs/time-model.md, "How good
# the time model is here"). Not a test: it is a timing of the machine, and a shared VM's
# neighbours move it (tests/backend/time_validation_test.cc asserts what holds however loaded the
# machine is). Run by hand:
#
#   bench/time_validation.sh BUILD_DIR [CYCLES]      (default 3 cycles)
#
# Three generated 4-block transformers on 2 ranks (8 iterations, buckets of 1 MB, six 1.6-4.5 MB
# reduce-scatters per iteration): compute-bound (--device-tflops 0.2, about 37 ms of compute to
# 5 ms of collectives per iteration), mixed (0.5: 15 ms : 5 ms) and comm-bound (2: 3.7 ms : 5 ms).
# Each cycle calibrates on 2 ranks, then replays the three under the four default policies on
# the host backend with that profile (run --profile) and reads each policy's step-time error
# (predicted / measured - 1). The table gives, per workload, the min, median and max error over
# cycles and policies, what compute alone (the sim without a profile) would be off by, and the
# load average before the first cycle.
set -euo pipefail
build=$(realpath "$1")
cycles=${2:-3}
bin=$build/bucketsim
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mpi=(mpirun --allow-run-as-root --oversubscribe -np 2)
policies=(--policy always-allocated --policy backward-only --policy per-group-dedup
  --policy unbucketed)
declare -A tflops=([compute-bound]=0.2 [mixed]=0.5 [comm-bound]=2)
workloads=(compute-bound mixed comm-bound)

for w in "${workloads[@]}"; do
  for rank in 0 1; do
    "$bin" gen transformer --layers 4 --hidden 256 --heads 4 --vocab 4096 --seq 256 \
      --world-size 2 --rank "$rank" --iterations 8 --device-tflops "${tflops[$w]}" \
      --param-dtype fp32 --bucket-cap-mb 1 -o "$work/$w-$rank.json" 2>/dev/null
  done
  "$bin" run "$work/$w-0.json" --backend sim --policy unbucketed --json "$work/$w-alone.json" \
    >/dev/null
done

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); $cycles cycle(s)"
for ((c = 1; c <= cycles; ++c)); do
  "${mpi[@]}" "$bin" calibrate -o "$work/profile-$c.json" --max-bytes 16MiB >/dev/null
  for w in "${workloads[@]}"; do
    "${mpi[@]}" "$bin" run "$work/$w-{rank}.json" --profile "$work/profile-$c.json" \
      --no-verify "${policies[@]}" --json "$work/$w-report-$c.json" >/dev/null
  done
done

/usr/bin/python3 - "$work" "$cycles" "${workloads[@]}" <<'PY'
import json, statistics, sys
work, cycles, workloads = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
print(f"{'workload':<14} {'min':>7} {'median':>7} {'max':>7}  {'compute alone':>13}")
for w in workloads:
    alone = json.load(open(f"{work}/{w}-alone.json"))["policies"][0]["timing"]["step_time_us"]
    errors, alone_errors = [], []
    for c in range(1, cycles + 1):
        for policy in json.load(open(f"{work}/{w}-report-{c}.json"))["policies"]:
            timing = policy["timing"]
            errors.append(timing["prediction"]["step_time_error"])
            alone_errors.append(alone / timing["step_time_us"] - 1)
    pct = lambda x: f"{100 * x:+.1f}%"
    print(f"{w:<14} {pct(min(errors)):>7} {pct(statistics.median(errors)):>7} "
          f"{pct(max(errors)):>7}  {pct(statistics.median(alone_errors)):>13}")
PY
