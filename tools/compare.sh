#!/usr/bin/env bash
# The README's first command: set up, build, and compare the bucket policies on the shipped
# default trace; the table goes to the terminal, the JSON report to reports/latest/.
# Extra arguments go to `bucketsim compare`. Only what the binary needs is installed and built
# (tools/setup.sh tool, tools/build.sh tool); tools/test.sh adds the rest.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
tools/setup.sh tool
mkdir -p "$build_dir"
echo "build: log in $build_dir/build.log"
if ! tools/build.sh tool >"$build_dir/build.log" 2>&1; then
  tail -n 40 "$build_dir/build.log" >&2
  echo "build failed (full log: $build_dir/build.log)" >&2
  exit 1
fi
"$build_dir"/bucketsim compare --json reports/latest/compare.json "$@"
