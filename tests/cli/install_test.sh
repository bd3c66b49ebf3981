#!/usr/bin/env bash
# Install.*: `cmake --install` lays out bin/ and share/bucketsim/{traces,profiles,schemas,tools};
# the installed binary, moved elsewhere and run from / with the source and build trees hidden
# (an empty tmpfs mounted over the source tree in a private mount namespace), finds its default
# trace beside itself and runs `compare` and `compare --profile`.
# Usage: install_test.sh BUILD_DIR SOURCE_DIR
set -uo pipefail
build=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log" 2>&1 ||
  fail "cmake --install: $(cat "$tmp/install.log")"
for f in bin/bucketsim share/bucketsim/traces/gpt-24l-h1024-ws8.json \
  share/bucketsim/traces/tiny-ws2.json share/bucketsim/profiles/h100-8gpu-nvlink.json \
  share/bucketsim/schemas/trace-v1.schema.json share/bucketsim/schemas/report-v1.schema.json \
  share/bucketsim/tools/snapshot_to_trace.py share/bucketsim/tools/validate_schema.py \
  share/bucketsim/tools/record_program.py share/bucketsim/tools/recorder/cli.py \
  share/bucketsim/tools/recorder/wrapped_fsdp.py share/bucketsim/tools/examples/tiny_gpt.py; do
  [[ -e $tmp/prefix/$f ]] || fail "not installed: $f"
done
# Relocatable: nothing may depend on the prefix it was installed to.
mv "$tmp/prefix" "$tmp/moved"
prefix=$tmp/moved

cat >"$tmp/run.sh" <<'RUN'
set -eu
src=$1 prefix=$2
[ ! -e "$src/traces" ] || { echo "the source tree is still visible"; exit 1; }
cd /
env -u BUCKETSIM_DEFAULT_TRACE "$prefix/bin/bucketsim" compare --json "$prefix/out.json"
env -u BUCKETSIM_DEFAULT_TRACE "$prefix/bin/bucketsim" compare \
  "$prefix/share/bucketsim/traces/tiny-ws2.json" \
  --profile "$prefix/share/bucketsim/profiles/h100-8gpu-nvlink.json"
RUN
# The sanitizer build's suppressions live in the source tree, which is about to disappear.
cp "$src/tests/sanitizers/lsan.supp" "$tmp/lsan.supp"
export LSAN_OPTIONS=${LSAN_OPTIONS:-}
export LSAN_OPTIONS=${LSAN_OPTIONS//$src\/tests\/sanitizers\/lsan.supp/$tmp\/lsan.supp}
if unshare --mount true 2>/dev/null; then
  unshare --mount sh -c "mount -t tmpfs none '$src' && sh '$tmp/run.sh' '$src' '$prefix'" \
    >"$tmp/out" 2>&1 || fail "installed compare: $(cat "$tmp/out")"
else
  fail "needs unshare --mount (root, or user namespaces) to hide the source tree"
fi
grep -q "gpt-24l-h1024-ws8.json: world size 8" "$tmp/out" || fail "default trace: $(cat "$tmp/out")"
grep -q "tiny-ws2.json: world size 2" "$tmp/out" || fail "tiny trace: $(cat "$tmp/out")"
grep -q "\"trace_path\": \"$prefix/share/bucketsim/traces/gpt-24l-h1024-ws8.json\"" \
  "$prefix/out.json" || fail "the default trace was not read from the prefix"
echo "ok: installed, moved, and run with the source tree hidden"
