#!/usr/bin/env bash
# RunFaults.SurvivorsNameTheLostRank: bucketsim's own lost-rank watch (backend/host/peer_watch.h),
# not the launcher's, ends `bucketsim run` when a rank stops answering mid-replay.
#   SIGSTOP of rank 2 of 4 (a hung rank: Open MPI sees nothing wrong): every surviving rank
#   prints "rank R: error: lost contact with rank 2 (no progress for T s; last seen at event E)"
#   (or "last seen before its first collective" when the stop came that early),
#   the job ends with exit 2 within --timeout of the stop (the test allows 3 s more for a busy
#   machine; the times are printed), no rank is left behind.
#   kill -9 of rank 1 of 2 under `mpirun --enable-recovery` (a launcher that does not end the job
#   when a rank dies): rank 0 names rank 1 the same way and exits 2 itself (mpirun's own exit
#   status in recovery mode does not carry it, so a wrapper records each rank's).
#   SIGSTOP of every rank of 2 for 3 s, then SIGCONT (a paused job or VM, or a host too busy to
#   schedule it): no rank heard from its peers during the pause, but none of them was silent
#   while it was watched, so nobody is blamed and the run ends normally (exit 0, no "lost
#   contact"). Before the watch discounted its own stalls, both ranks aborted the job on waking.
# The replays are slowed with --compute-scale so that "mid-replay" lasts seconds.
# Usage: run_lost_rank_test.sh BUCKETSIM SOURCE_DIR MPIEXEC
set -uo pipefail
bin=$1 src=$2 mpiexec=$3
tmp=$(mktemp -d)
source "$(dirname "$0")/mpi_job.sh"
mpi=("$mpiexec" --allow-run-as-root --oversubscribe)
policies=(--policy backward-only --policy always-allocated --policy per-group-dedup)
timeout_s=2
# The watch ends the job within --timeout of the lost rank's last heartbeat; the machine may be
# busy: 3 s of slack.
limit_s=$((timeout_s + 3))

# elapsed_since START_NS: seconds (one decimal) since a `date +%s%N`.
elapsed_since() { echo "scale=1; ($(date +%s%N) - $1) / 1000000000" | bc; }

# 1. SIGSTOP of rank 2 of 4.
cp "$src/traces/gpt-4l-h256-ws4.json" "$tmp/t.json"
"${mpi[@]}" -np 4 "$bin" run "$tmp/t.json" "${policies[@]}" --compute-scale 20000 \
  --timeout $timeout_s >"$tmp/out" 2>&1 &
job=$!
rank2=$(rank_pid 2) || fail "rank 2 never started: $(cat "$tmp/out")"
pids=()
for r in 0 1 2 3; do
  pid=$(rank_pid $r) || fail "rank $r never started: $(cat "$tmp/out")"
  pids+=("$pid")
done
watching "${pids[@]}"
sleep 2  # every rank is inside the replay now
start=$(date +%s%N)
kill -STOP "$rank2"
wait_job $((limit_s + 5))
rc=$?
took=$(elapsed_since "$start")
sed 's/^/  | /' "$tmp/out"
[[ $rc == 2 ]] || fail "SIGSTOP: mpirun exited $rc, expected 2"
(($(echo "$took <= $limit_s" | bc))) || fail "SIGSTOP: the job took $took s to end (limit $limit_s s)"
# On a busy machine rank 2 may not have reached its first collective in the 2 s before the stop;
# the survivors then say so ("last seen before its first collective") and must still name it.
for r in 0 1 3; do
  grep -Eq "^bucketsim: rank $r: error: lost contact with rank 2 \(no progress for [0-9.]+ s; last seen (at event [0-9]+|before its first collective)\)" \
    "$tmp/out" || fail "SIGSTOP: rank $r did not name rank 2"
done
grep "lost contact" "$tmp/out" | grep -v "with rank 2 " && fail "SIGSTOP: a rank blamed the wrong rank"
pgrep -f "run $tmp/" >/dev/null && fail "SIGSTOP: ranks left behind: $(pgrep -af "run $tmp/")"
echo "ok: SIGSTOP of rank 2 of 4: ranks 0, 1, 3 named it; exit $rc after $took s (--timeout $timeout_s)"

# 2. kill -9 of rank 1 of 2, the launcher told to carry on.
cp "$src/traces/tiny-ws2.json" "$tmp/t.json"
# shellcheck disable=SC2016  # expanded by the wrapper's shell, per rank
"${mpi[@]}" --enable-recovery -np 2 bash -c \
  '"$0" "$@"; echo "rank $OMPI_COMM_WORLD_RANK exit $?" >>'"$tmp/codes" \
  "$bin" run "$tmp/t.json" "${policies[@]}" --compute-scale 3000 --timeout $timeout_s \
  >"$tmp/out" 2>&1 &
job=$!
rank1=$(rank_pid 1) || fail "rank 1 never started: $(cat "$tmp/out")"
watching "$(rank_pid 0)" "$rank1"
sleep 1.5
start=$(date +%s%N)
kill -9 "$rank1"
wait_job $((limit_s + 5))
took=$(elapsed_since "$start")
sed 's/^/  | /' "$tmp/out"
grep -Eq "^bucketsim: rank 0: error: lost contact with rank 1 \(no progress for [0-9.]+ s; last seen at event [0-9]+\)" \
  "$tmp/out" || fail "kill -9: rank 0 did not name rank 1"
grep -qx "rank 0 exit 2" "$tmp/codes" || fail "kill -9: rank 0's exit: $(cat "$tmp/codes")"
(($(echo "$took <= $limit_s" | bc))) || fail "kill -9: the job took $took s to end (limit $limit_s s)"
pgrep -f "run $tmp/" >/dev/null && fail "kill -9: ranks left behind: $(pgrep -af "run $tmp/")"
echo "ok: kill -9 of rank 1 of 2 (--enable-recovery): rank 0 named it and exited 2 after $took s"

# 3. SIGSTOP of both ranks of 2 for longer than --timeout, then SIGCONT.
rm -f "$tmp/codes"
cp "$src/traces/tiny-ws2.json" "$tmp/t.json"
"${mpi[@]}" -np 2 "$bin" run "$tmp/t.json" "${policies[@]}" --compute-scale 3000 \
  --timeout $timeout_s >"$tmp/out" 2>&1 &
job=$!
ranks=("$(rank_pid 0)" "$(rank_pid 1)")
[[ -n ${ranks[0]} && -n ${ranks[1]} ]] || fail "pause: a rank never started: $(cat "$tmp/out")"
watching "${ranks[@]}"
sleep 1.5
kill -STOP "${ranks[@]}"
sleep $((timeout_s + 1))
kill -CONT "${ranks[@]}"
wait_job 30
rc=$?
grep "lost contact" "$tmp/out" && fail "pause: a rank blamed a peer for its own stall: $(cat "$tmp/out")"
[[ $rc == 0 ]] || fail "pause: mpirun exited $rc, expected 0: $(cat "$tmp/out")"
echo "ok: SIGSTOP of both ranks of 2 for $((timeout_s + 1)) s: nobody blamed, exit 0"
