#!/usr/bin/env bash
# Regenerates the generated traces shipped in traces/ with the built binary; the golden tests
# then show whether anything downstream changed. With --check, writes them to a temporary
# directory instead and fails when they differ from the shipped ones (a ctest runs this).
# Usage: tools/regen-traces.sh [--check] [BINARY]   (BINARY defaults to build/bucketsim)
set -euo pipefail
cd "$(dirname "$0")/.."
check=0
if [[ ${1:-} == --check ]]; then check=1; shift; fi
bin=${1:-build/bucketsim}
out=traces
if ((check)); then out=$(mktemp -d); trap 'rm -rf "$out"' EXIT; fi

"$bin" gen transformer --layers 24 --hidden 1024 --heads 16 --seq 2048 --micro-batch 1 \
  --vocab 50304 --world-size 8 --iterations 2 --param-dtype bf16 --groups per-instance \
  --activation-checkpointing -o "$out/gpt-24l-h1024-ws8.json" 2>/dev/null
# Small traces for the MPI tests: a 4-layer GPT on 4 ranks with bf16 parameters reduced in fp32
# (fairscale's fp32_reduce_scatter), and fairscale's memory-test convnet on 2 ranks; both with
# one process-group object per FSDP instance.
"$bin" gen transformer --layers 4 --hidden 256 --heads 4 --seq 256 --micro-batch 2 \
  --vocab 8192 --world-size 4 --iterations 2 --param-dtype bf16 --fp32-reduce-scatter \
  --groups per-instance -o "$out/gpt-4l-h256-ws4.json" 2>/dev/null
"$bin" gen fairscale-convnet --hidden-dim 32 --world-size 2 --iterations 2 \
  --groups per-instance -o "$out/convnet-ws2.json" 2>/dev/null

if ((check)); then
  status=0
  for f in "$out"/*.json; do
    name=$(basename "$f")
    if ! cmp -s "$f" "traces/$name"; then
      echo "traces/$name differs from what '$bin gen' writes now; run tools/regen-traces.sh" >&2
      status=1
    fi
  done
  exit $status
fi
echo "regenerated traces/gpt-24l-h1024-ws8.json traces/gpt-4l-h256-ws4.json traces/convnet-ws2.json"
