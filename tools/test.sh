#!/usr/bin/env bash
# The README's second command: set up, build, run every test with ctest.
# torch 2.6 (the FSDP1/FSDP2 oracle, tools/torch2.sh) lives in a Debian 13 root made once here
# (about 2 min, reused after); where it cannot be made the tests that need it report themselves
# skipped, with the reason, and the rest still run.
#
#   tools/test.sh           everything
#   tools/test.sh --fast    the inner loop: the tests labelled fast, every one but those
#                           labelled oracle (real PyTorch as the reference) or slow (over a
#                           minute); ctest's own arguments may follow (-R REGEX, ...)
set -euo pipefail
cd "$(dirname "$0")/.."
select=()
if [[ "${1:-}" == "--fast" ]]; then
  select=(-L fast)
  shift
fi
tools/setup.sh test
tools/torch2.sh setup ||
  echo "test: no torch 2.6 root (see above): the tests that need it will be skipped" >&2
tools/build.sh all
start=$SECONDS
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j "$(nproc)" "${select[@]}" "$@"
echo "test: ctest took $((SECONDS - start)) s"
