#!/usr/bin/env bash
# Check.JUnit.*: the JUnit XML `bucketsim check --junit` writes is accepted by tests/cli/junit.xsd
# (the Jenkins/Ant JUnit structure), whatever the verdict: a pass, a fail with a skipped
# comparison, and an error (exit 2). And the schema is not vacuous: it rejects a broken report.
# Usage: junit_schema_test.sh BUCKETSIM SOURCE_DIR OUT_DIR
# Needs xmllint (Debian: libxml2-utils; tools/setup.sh installs it).
set -uo pipefail
bin=$1 src=$2 out=$3
xsd=$src/tests/cli/junit.xsd
mkdir -p "$out"
cd "$src" || exit 1
command -v xmllint >/dev/null || { echo "xmllint missing: run tools/setup.sh"; exit 1; }
failed=0

# expect_exit CODE NAME ARGS...: runs bucketsim check with --junit OUT/NAME.xml, wants CODE,
# then validates the file.
expect_exit() {
  local want=$1 name=$2
  shift 2
  "$bin" check "$@" --junit "$out/$name.xml" >"$out/$name.out" 2>&1
  local got=$?
  if [[ $got -ne $want ]]; then
    echo "FAIL $name: exit $got, expected $want"; cat "$out/$name.out"; failed=1; return
  fi
  if xmllint --noout --schema "$xsd" "$out/$name.xml"; then
    echo "ok   $name: exit $got, JUnit valid"
  else
    echo "FAIL $name: JUnit rejected by the schema"; failed=1
  fi
}

expect_exit 0 pass traces/tiny-ws2.json --policy backward-only --max-peak-allocated 4MiB \
  --max-at-mark 'after fwd=3MiB' --max-step-time-us 400
expect_exit 1 fail traces/tiny-ws2.json --policy backward-only --policy unbucketed \
  --max-peak-allocated 3MiB --baseline tests/golden/compare-tiny-ws2-general.json --tolerance 2% \
  --allow-different-trace
expect_exit 1 oom traces/tiny-ws2.json --policy backward-only --device-memory 4MiB \
  --device-overhead 0 --max-peak-allocated 1GiB
expect_exit 2 error traces/tiny-ws2.json --budget /nonexistent/budget.json

if xmllint --noout --schema "$xsd" "$src/tests/cli/junit-bad-testcase.xml" 2>"$out/bad.err"; then
  echo "FAIL the schema accepts junit-bad-testcase.xml"; failed=1
elif grep -q "The attribute 'name' is required but missing" "$out/bad.err"; then
  echo "ok   the schema rejects a testcase without a name"
else
  echo "FAIL junit-bad-testcase.xml rejected for another reason:"; cat "$out/bad.err"; failed=1
fi
exit $failed
