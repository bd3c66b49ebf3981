#!/usr/bin/env bash
# Regenerates the example reports in reports/examples/ with the built binary: for each shipped
# trace the JSON report of `bucketsim compare` (every default policy, caching allocator model)
# and the page `bucketsim report` makes of it (report.html, report.md, charts/*.svg); and one
# `bucketsim sweep` (sweep.json) with its page, which leads with the Pareto chart, and a sweep of
# two traces (sweeps.json), a section each. The context block is made deterministic
# (BUCKETSIM_DETERMINISTIC_CONTEXT=1: no host, no git sha, argv[0] "bucketsim") and every path
# in it is relative, so the files are the same bytes on any machine.
# With --check, writes them to a temporary directory instead and fails when they differ from
# the committed ones (a ctest runs this).
# Usage: tools/regen-reports.sh [--check] [BINARY]   (BINARY defaults to build/bucketsim)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
check=0
if [[ ${1:-} == --check ]]; then check=1; shift; fi
bin=$(realpath "${1:-build/bucketsim}")
out=reports/examples
if ((check)); then out=$(mktemp -d); trap 'rm -rf "$out"' EXIT; fi
export BUCKETSIM_DETERMINISTIC_CONTEXT=1

# example NAME TRACE [compare flags...]: the JSON report of TRACE and its page.
example() {
  local name=$1 trace=$2
  shift 2
  mkdir -p "$out/$name"
  rm -rf "${out:?}/$name/charts"
  # The report goes to stdout, so that no output path lands in its argv.
  "$bin" compare "$trace" --format json "$@" >"$out/$name/compare.json"
  # Run from the example's directory: the page names its input as "compare.json".
  (cd "$out/$name" && "$bin" report compare.json -o . >/dev/null)
}

example tiny-ws2 traces/tiny-ws2.json
example gpt-24l-h1024-ws8 traces/gpt-24l-h1024-ws8.json
example gpt-24l-h1024-ws8-expandable traces/gpt-24l-h1024-ws8.json \
  --alloc-conf expandable_segments:True
# The default trace under every framework's strategy: fairscale, DDP, DeepSpeed ZeRO (its
# default bucket and HF's "auto" hidden^2 = 1048576 with overlap_comm), Megatron-Core, FSDP2.
example frameworks-gpt-24l-h1024-ws8 traces/gpt-24l-h1024-ws8.json \
  --policy backward-only --policy ddp --policy ddp,grad_as_view=1 --policy zero12 \
  --policy zero12,reduce_bucket_size=1048576,overlap_comm=1 --policy zero3 --policy megatron \
  --policy megatron,overlap_grad_reduce=1 --policy fsdp2 --policy hold-until-end
# One page of two reports: the default allocator settings against expandable segments.
mkdir -p "$out/gpt-default-vs-expandable"
rm -rf "$out/gpt-default-vs-expandable/charts"
(cd "$out/gpt-default-vs-expandable" &&
  "$bin" report ../gpt-24l-h1024-ws8/compare.json ../gpt-24l-h1024-ws8-expandable/compare.json \
    -o . >/dev/null)
# A sweep: the default policies at four bucket caps, timed with the H100 profile, and the
# fastest configuration within a budget.
mkdir -p "$out/sweep-gpt-4l-h256-ws4"
rm -rf "$out/sweep-gpt-4l-h256-ws4/charts"
"$bin" sweep traces/gpt-4l-h256-ws4.json --bucket-cap-mb 1,5,25,100 \
  --profile traces/profiles/h100-8gpu-nvlink.json --budget 256MiB --format json \
  >"$out/sweep-gpt-4l-h256-ws4/sweep.json"
(cd "$out/sweep-gpt-4l-h256-ws4" && "$bin" report sweep.json -o . >/dev/null)
# A sweep of two traces with the same flags: one report of both ({schema_version, sweeps}) and
# the page with a section per trace.
mkdir -p "$out/sweeps-gpt-4l-and-convnet"
rm -rf "$out/sweeps-gpt-4l-and-convnet/charts"
"$bin" sweep traces/gpt-4l-h256-ws4.json traces/convnet-ws2.json --bucket-cap-mb 1,5,25,100 \
  --profile traces/profiles/h100-8gpu-nvlink.json --budget 256MiB --format json \
  >"$out/sweeps-gpt-4l-and-convnet/sweeps.json"
(cd "$out/sweeps-gpt-4l-and-convnet" && "$bin" report sweeps.json -o . >/dev/null)

if ((check)); then
  if ! diff -r "$out" "$root/reports/examples" >/dev/null; then
    diff -r "$out" "$root/reports/examples" | head -20 >&2
    echo "reports/examples differ from what '$bin' writes now; run tools/regen-reports.sh" >&2
    exit 1
  fi
  exit 0
fi
echo "regenerated reports/examples/"
