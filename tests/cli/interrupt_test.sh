#!/usr/bin/env bash
# Interrupt.*: SIGINT or SIGTERM while bucketsim writes a file leaves no partial file: the target
# keeps its previous contents (or is the complete new file, when the signal came after the
# rename), no temporary file is left beside it, and the exit code is 128 + the signal (130, 143).
# Usage: interrupt_test.sh BUCKETSIM SOURCE_DIR
#   gen:     the trace streams to its temporary file as it is generated, so a signal sent once
#            the temporary file exists always arrives mid-write (deterministic).
#   compare: the --json report of a 300k-event trace is written after the replays; the signal
#            goes as soon as its temporary file appears (up to 5 tries to land inside the write).
set -uo pipefail
bin=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# wait_for_temp DIR NAME PID: until DIR holds NAME's temporary file (0), or PID ended (1).
wait_for_temp() {
  while kill -0 "$3" 2>/dev/null; do
    compgen -G "$1/.$2.*.tmp" >/dev/null && return 0
    sleep 0.002
  done
  return 1
}

# check_outcome DIR NAME RC WANT_RC: the exit code, the target never partial, nothing left over.
check_outcome() {
  local dir=$1 name=$2 rc=$3 want=$4
  [[ $rc == "$want" ]] || fail "$name: exit $rc, expected $want; stderr: $(cat "$dir/err")"
  if [[ $(cat "$dir/$name") != previous ]]; then
    /usr/bin/python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$dir/$name" ||
      fail "$name: neither the previous contents nor complete JSON"
  fi
  local left
  left=$(ls -A "$dir" | grep -v -x -e "$name" -e err -e trace.json || true)
  [[ -z $left ]] || fail "$name: left behind: $left"
}

# Generation, interrupted mid-stream: SIGINT -> 130, SIGTERM -> 143.
for signal in INT TERM; do
  dir=$tmp/gen-$signal
  mkdir -p "$dir"
  echo previous >"$dir/big.json"
  "$bin" gen transformer --layers 200 --iterations 2000 -o "$dir/big.json" 2>"$dir/err" &
  pid=$!
  wait_for_temp "$dir" big.json $pid || fail "gen: no temporary file appeared"
  kill -s $signal $pid
  wait $pid
  rc=$?
  want=$([[ $signal == INT ]] && echo 130 || echo 143)
  check_outcome "$dir" big.json $rc "$want"
  [[ $(cat "$dir/big.json") == previous ]] || fail "gen $signal: the previous trace was replaced"
  echo "ok: gen, SIG$signal mid-write: exit $rc, previous file intact, no temporary file"
done

# compare --json of a large trace.
dir=$tmp/compare
mkdir -p "$dir"
"$bin" gen transformer --layers 100 --iterations 120 -o "$dir/trace.json" 2>/dev/null ||
  fail "gen of the compare trace failed"
for attempt in 1 2 3 4 5; do
  echo previous >"$dir/report.json"
  "$bin" compare "$dir/trace.json" --json "$dir/report.json" >/dev/null 2>"$dir/err" &
  pid=$!
  if ! wait_for_temp "$dir" report.json $pid; then
    wait $pid
    echo "attempt $attempt: the write ended before the signal; again"
    continue
  fi
  kill -s INT $pid
  wait $pid
  check_outcome "$dir" report.json $? 130
  echo "ok: compare --json, SIGINT during the write (attempt $attempt): exit 130, no partial file"
  exit 0
done
fail "compare: 5 tries, the signal never landed inside the write"
