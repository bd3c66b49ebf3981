# Helpers of the tests that start `bucketsim run` under mpirun in the background and disturb it
# (run_faults_test.sh, run_lost_rank_test.sh). Sourced; the caller sets $tmp (a scratch
# directory, removed at exit) and starts the job into $job.
job=
cleanup() {
  [[ -n $job ]] && kill -9 "$job" 2>/dev/null
  # A rank left stopped (SIGSTOP) by a failed test must not outlive it.
  for pid in $(pgrep -f "$tmp/" 2>/dev/null); do kill -CONT "$pid"; kill -9 "$pid"; done 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# rank_pid RANK: the pid of that rank's bucketsim (its OMPI_COMM_WORLD_RANK) under the job's
# tmp directory, once it has been running for a moment.
rank_pid() {
  local deadline=$((SECONDS + 15))
  while ((SECONDS < deadline)); do
    for pid in $(pgrep -f "run $tmp/" 2>/dev/null); do
      [[ $(cat "/proc/$pid/comm" 2>/dev/null) == bucketsim ]] || continue
      if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1"; then
        echo "$pid"
        return 0
      fi
    done
    sleep 0.1
  done
  return 1
}

# watching PID...: waits until each of these ranks runs its lost-rank watch (the "peer-watch"
# thread, backend/host/peer_watch.h), so that a rank disturbed later is one the watch covers.
watching() {
  local deadline=$((SECONDS + 30))
  for pid in "$@"; do
    until grep -qx peer-watch /proc/"$pid"/task/*/comm 2>/dev/null; do
      ((SECONDS < deadline)) || fail "rank $pid never started its watch: $(cat "$tmp/out")"
      sleep 0.1
    done
  done
}

# wait_job LIMIT_S: mpirun's exit code; fails when it is still running after LIMIT_S.
wait_job() {
  local deadline=$((SECONDS + $1))
  while kill -0 "$job" 2>/dev/null; do
    ((SECONDS < deadline)) || fail "mpirun still running after $1 s: $(cat "$tmp/out")"
    sleep 0.1
  done
  wait "$job"
  local rc=$?
  job=
  return $rc
}
