#!/usr/bin/env bash
# The emulated testbed for one run of the end-to-end tests (orchestrator/tests/it/e2e.rs): taken
# down first (leftovers of an earlier run, whatever state they are in), brought up fresh, and
# taken down again when the run ends.
#
#   test-session.sh                 as nextest's setup script `emulated-testbed`
#                                   (.config/nextest.toml): the run is this script's parent,
#                                   cargo-nextest
#   test-session.sh --watch PID     for the run of process PID (the test binary itself, under
#                                   plain `cargo test`)
#
# nextest has setup scripts but no teardown scripts, so the teardown is a watcher: a detached
# process (its own session, stdio on the log) that polls PID every 0.5 s and, once PID has exited
# (normally, by a failure, Ctrl-C or SIGKILL), runs down.sh. LATENCY_EMU_KEEP=1 starts no watcher:
# the testbed stays up after the run, for inspection (down.sh removes it). Run by hand without
# --watch under no nextest, the testbed stays up too.
#
# One testbed per machine (the namespaces have fixed names): a lock (flock on $lock) serialises
# this script and the watcher's teardown, and a watcher of an earlier run still waiting is stopped
# (its whole process group, so that no teardown of its own starts later) before the testbed is
# brought up. Two test runs at the same time on one machine are not supported: the second takes
# the testbed down under the first.
#
# Under nextest, the outcome is passed to the tests in their environment (nextest's $NEXTEST_ENV):
#   LATENCY_EMU_TESTBED   `up`, or `unavailable: <why>` (root or a tool missing: the tests skip
#                         or, under CI, fail), or `failed: <why> (log: <file>)` (every e2e test
#                         fails with the log)
#   LATENCY_EMU_BIN_DIR   the folder of the fpga-emu and latency-agent that up.sh installed: the
#                         build nextest runs (the folder of its NEXTEST_LD_LIBRARY_PATH that holds
#                         them: target/<profile>); the tests check it is their own
# and the script exits 0 even when the testbed did not come up, so that the other tests of the run
# still run and each e2e test fails with the reason. Without $NEXTEST_ENV the exit status says it:
# 0 up, 1 failed, 2 unavailable; the log is printed on failure.
#
# BIN_DIR, if set, is passed on to up.sh. Log: /var/tmp/latency-emu-test/session.log.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
work=/var/tmp/latency-emu-test
lock=$work/lock
log=$work/session.log
watcher_pid=$work/watcher.pid

watch=
case "${1:-}" in
  --watch) watch=${2:?--watch needs a pid} ;;
  "") [ -n "${NEXTEST_ENV:-}" ] && watch=$PPID ;;
  *) echo "usage: $0 [--watch PID]" >&2; exit 64 ;;
esac

say() { echo "emulated testbed: $*"; }

# outcome STATE STATUS: report STATE (to nextest's environment file, or by exit status STATUS).
outcome() {
  if [ -n "${NEXTEST_ENV:-}" ]; then
    {
      echo "LATENCY_EMU_TESTBED=$1"
      echo "LATENCY_EMU_BIN_DIR=${BIN_DIR:-}"
    } >> "$NEXTEST_ENV"
    exit 0
  fi
  exit "$2"
}

missing=
[ "$(id -u)" = 0 ] || missing="$missing root"
for tool in ip tc ssh ssh-keygen tcpreplay flock setsid; do
  command -v "$tool" >/dev/null || missing="$missing $tool"
done
[ -x /usr/sbin/sshd ] || missing="$missing /usr/sbin/sshd"
if [ -n "$missing" ]; then
  say "not brought up: needs$missing"
  outcome "unavailable: needs$missing" 2
fi

# The build under test: nextest's library path holds its target/<profile> folder (after the
# output folders of build scripts).
if [ -z "${BIN_DIR:-}" ] && [ -n "${NEXTEST_LD_LIBRARY_PATH:-}" ]; then
  IFS=: read -ra dirs <<< "$NEXTEST_LD_LIBRARY_PATH"
  for d in "${dirs[@]}"; do
    if [ -x "$d/fpga-emu" ] && [ -x "$d/latency-agent" ]; then BIN_DIR=$d; break; fi
  done
fi
export BIN_DIR

mkdir -p "$work"
: > "$log"

# A watcher of an earlier run: stop it and everything it started (it is its session's and
# process group's leader), unless it is gone or the pid now names another process.
if [ -s "$watcher_pid" ]; then
  old=$(cat "$watcher_pid")
  if tr '\0' ' ' < "/proc/$old/cmdline" 2>/dev/null | grep -q latency-emu-watcher; then
    kill -TERM -- "-$old" 2>/dev/null && say "stopped the watcher of an earlier run (pid $old)"
  fi
  rm -f "$watcher_pid"
fi

# The watcher: started before up.sh, so that a testbed half brought up is taken down too.
if [ -n "$watch" ] && [ -z "${LATENCY_EMU_KEEP:-}" ]; then
  setsid bash -c '
    while kill -0 "$1" 2>/dev/null; do sleep 0.5; done
    echo "--- $(date +%T) process $1 has exited: down.sh"
    flock --close "$2" "$3/down.sh"
    rm -f "$4"
  ' latency-emu-watcher "$watch" "$lock" "$here" "$watcher_pid" < /dev/null >> "$work/watcher.log" 2>&1 &
  echo $! > "$watcher_pid"
  teardown="taken down when process $watch exits (watcher pid $!, log $work/watcher.log)"
else
  teardown="left up after the run: $here/down.sh takes it down"
fi

start=$(date +%s%N)
# The lock's descriptor is closed for down.sh and up.sh: the daemons up.sh starts would inherit it
# and hold the lock as long as they live.
(
  flock 9
  echo "--- down.sh (leftovers)"
  "$here/down.sh" 9>&-
  echo "--- up.sh (BIN_DIR=${BIN_DIR:-up.sh default})"
  "$here/up.sh" 9>&-
) 9> "$lock" >> "$log" 2>&1
status=$?
took=$(( ($(date +%s%N) - start) / 1000000 ))
if [ "$status" != 0 ]; then
  why=$(grep -h 'error' "$log" | tail -1)
  say "FAILED to come up (${why:-up.sh exited with $status}); log: $log"
  [ -n "${NEXTEST_ENV:-}" ] || cat "$log" >&2
  outcome "failed: ${why:-up.sh exited with $status} (log: $log)" 1
fi
say "up in ${took} ms (fpga-emu and agent from ${BIN_DIR:-up.sh default}; log $log); $teardown"
outcome up 0
