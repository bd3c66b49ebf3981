#!/usr/bin/env bash
# RunFaults.*: `bucketsim run` under mpirun when a rank is lost or the job is interrupted.
#   kill -9 of one rank mid-replay: every other rank ends, non-zero, well within --timeout, and
#   the output names the lost rank.
#   SIGINT to mpirun: every rank ends promptly, non-zero, and no partial --json report is left.
# Rank 1's trace is tiny-ws2 with an hour-long backward compute, so mid-replay is a state the
# test can wait for: rank 1 sleeps in its compute, rank 0 waits in its first reduce-scatter.
# Usage: run_faults_test.sh BUCKETSIM SOURCE_DIR MPIEXEC
set -uo pipefail
bin=$1 src=$2 mpiexec=$3
tmp=$(mktemp -d)
source "$(dirname "$0")/mpi_job.sh"

cp "$src/traces/tiny-ws2.json" "$tmp/t-rank0.json"
sed 's/"dur_us": 200/"dur_us": 3600000000/' "$src/traces/tiny-ws2.json" >"$tmp/t-rank1.json"
cmp -s "$tmp/t-rank0.json" "$tmp/t-rank1.json" && fail "could not make rank 1's trace stall"
timeout_s=20

# start_job: mpirun -np 2 bucketsim run in the background, stdout+stderr to $tmp/out.
start_job() {
  "$mpiexec" --allow-run-as-root --oversubscribe -np 2 "$bin" run "$tmp/t-rank{rank}.json" \
    --policy backward-only --compute-scale 1 --timeout $timeout_s --json "$tmp/report.json" \
    >"$tmp/out" 2>&1 &
  job=$!
}

no_ranks_left() {
  pgrep -f "$tmp/t-rank" >/dev/null && fail "bucketsim ranks still running: $(pgrep -af "$tmp/t-rank")"
  ls -A "$tmp" | grep -q -e report.json -e '\.tmp$' && fail "partial output left: $(ls -A "$tmp")"
  return 0
}

# 1. kill -9 of rank 1 mid-replay.
start_job
rank1=$(rank_pid 1) || fail "rank 1 never started: $(cat "$tmp/out")"
rank_pid 0 >/dev/null || fail "rank 0 never started"
sleep 1  # both ranks are inside the replay now (rank 0 in its first reduce-scatter)
start=$SECONDS
kill -9 "$rank1"
wait_job $timeout_s
rc=$?
[[ $rc != 0 ]] || fail "kill -9: mpirun exited 0: $(cat "$tmp/out")"
grep -q "rank 1 .*signal 9\|rank 1 .*Killed" "$tmp/out" ||
  fail "kill -9: the lost rank is not named: $(cat "$tmp/out")"
no_ranks_left
echo "ok: kill -9 of rank 1: the job ended in $((SECONDS - start)) s (--timeout $timeout_s), exit $rc, rank 1 named"
sed 's/^/  | /' "$tmp/out"

# 2. SIGINT to mpirun mid-replay.
start_job
rank_pid 1 >/dev/null || fail "rank 1 never started: $(cat "$tmp/out")"
rank_pid 0 >/dev/null || fail "rank 0 never started"
sleep 1
start=$SECONDS
kill -INT "$job"
wait_job 10
rc=$?
[[ $rc != 0 ]] || fail "SIGINT: mpirun exited 0: $(cat "$tmp/out")"
no_ranks_left
echo "ok: SIGINT to mpirun: every rank ended in $((SECONDS - start)) s, exit $rc, no partial output"
sed 's/^/  | /' "$tmp/out"
