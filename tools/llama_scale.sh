#!/usr/bin/env bash
# bucketsim against PyTorch's FSDPMemTracker at Llama 3 8B's full shape (32 blocks; or the
# number of blocks given): the ctest Tools.LlamaScaleMemTracker's comparison at full depth, its
# table printed with both tools' times per configuration (tests/tools/llama_scale_test.py).
# Needs the torch 2.6 root (tools/torch2.sh setup) and a build (tools/build.sh).
#   tools/llama_scale.sh [BLOCKS]        about 2 min at 32 blocks on 2 cores
set -euo pipefail
cd "$(dirname "$0")/.."
LLAMA_LAYERS="${1:-32}" exec /usr/bin/python3 tests/tools/llama_scale_test.py --report
