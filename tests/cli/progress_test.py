#!/usr/bin/env python3
"""Progress on stderr: shown under a pseudo-terminal, never in a pipe unless --progress asks for
it, never with --quiet (cli/progress_reporter.h).

Usage: progress_test.py BUCKETSIM_BINARY SOURCE_DIR

BUCKETSIM_PROGRESS_DELAY_MS=0 lets a short replay show its line (the real delay is 2 s). The
line names the work, the bytes read of the file's size, the events, and the policies:
"replaying traces/gpt-4l-h256-ws4.json: ... of ... (..%), N events, ..../s, ETA ...; 4 policies".
"""
import os
import pty
import re
import subprocess
import sys

LINE = re.compile(r"replaying traces/gpt-4l-h256-ws4\.json: [0-9.]+ [KMG]?i?B of [0-9.]+ [KMG]iB "
                  r"\([0-9]+%\), [0-9.]+[kM]? events, [0-9.]+ [KMG]?i?B/s, ETA [0-9]+ s; "
                  r"4 policies")


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def under_pty(argv, cwd, env):
    """Runs argv with stderr (and stdin) on a pseudo-terminal, stdout in a pipe."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=slave, stdout=subprocess.PIPE,
                            stderr=slave)
    os.close(slave)
    err = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        err += chunk
    out = proc.stdout.read()
    proc.wait()
    os.close(master)
    return proc.returncode, out.decode(), err.decode(errors="replace")


def main():
    binary, source_dir = sys.argv[1], sys.argv[2]
    env = dict(os.environ, BUCKETSIM_PROGRESS_DELAY_MS="0")
    args = [binary, "compare", "traces/gpt-4l-h256-ws4.json"]

    code, out, err = under_pty(args, source_dir, env)
    if code != 0:
        fail(f"compare under a terminal exited {code}: {err}")
    if not LINE.search(err):
        fail(f"no progress line on the terminal's stderr: {err!r}")
    # The line is rewritten in place and erased at the end; the table is on stdout, untouched.
    if "\r\x1b[K" not in err or "replaying" in out or "peak alloc (MiB)" not in out:
        fail(f"progress not drawn in place on stderr only: stderr {err!r}")
    print("terminal:", LINE.search(err).group(0))

    code, out, err = under_pty(args + ["--quiet"], source_dir, env)
    if code != 0 or "replaying" in err:
        fail(f"--quiet still shows progress ({code}): {err!r}")

    piped = subprocess.run(args, cwd=source_dir, env=env, capture_output=True, text=True)
    if piped.returncode != 0 or piped.stderr != "":
        fail(f"progress in a pipe without --progress ({piped.returncode}): {piped.stderr!r}")

    forced = subprocess.run(args + ["--progress"], cwd=source_dir, env=env, capture_output=True,
                            text=True)
    if forced.returncode != 0 or not LINE.search(forced.stderr) or "\r" in forced.stderr:
        fail(f"--progress into a pipe: expected whole lines, got {forced.stderr!r}")
    print("PASS: progress on a terminal and with --progress; none in a pipe or with --quiet")
    return 0


if __name__ == "__main__":
    sys.exit(main())
