#!/usr/bin/env bash
# Regenerates the generated traces shipped in traces/ with the built binary; the golden tests
# then show whether anything downstream changed. Usage: tools/regen-traces.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-build}/bucketsim
"$bin" gen transformer --layers 24 --hidden 1024 --heads 16 --seq 2048 --micro-batch 1 \
  --vocab 50304 --world-size 8 --iterations 2 --dtype bf16 --groups per-instance \
  --activation-checkpointing -o traces/gpt-24l-h1024-ws8.json
