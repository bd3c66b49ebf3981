#!/usr/bin/env bash
# The README's first command: set up, build, and compare the bucket policies on the shipped
# default trace; the table goes to the terminal, the JSON report to reports/latest/.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
tools/build.sh >/dev/null
"${BUILD_DIR:-build}"/bucketsim compare --json reports/latest/compare.json "$@"
