#!/usr/bin/env bash
# Tear down the emulated testbed (see up.sh): stop every process by pid — the recorded ones
# (sshd ×2, fpga-emu ×2), the agent and capture the orchestrator may have left (their pidfiles in the
# hosts' work folders), then whatever still runs inside the five namespaces — and only then delete
# the namespaces and the management bridge (`ip netns del` does not kill processes).
#
# Idempotent. Keys and configuration in state/ are kept (up.sh reuses them); --purge removes them
# and /var/tmp/latency-emu as well.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
state=$here/state
run=/var/tmp/latency-emu
namespaces="sender switch fpga fpga2 receiver"

log() { echo "testbed-down: $*"; }

# gone PID: the process has exited (a zombie counts: its parent has yet to reap it).
gone() { [ ! -e "/proc/$1" ] || [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" = Z ]; }

# stop PID WHAT: SIGTERM, then SIGKILL after 3 s.
stop() {
  local pid=$1 what=$2
  gone "$pid" && return 0
  kill -TERM "$pid" 2>/dev/null
  for _ in $(seq 30); do gone "$pid" && { log "stopped $what (pid $pid)"; return 0; }; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null
  for _ in $(seq 10); do gone "$pid" && break; sleep 0.1; done
  if gone "$pid"; then log "killed $what (pid $pid) after SIGTERM was ignored"; else log "warning: $what (pid $pid) survives SIGKILL"; fi
}

# A pidfile's process, only if it still lives in one of our namespaces (a recycled pid is spared).
ours() {
  [ -s "$1" ] || return 1
  local pid ns
  pid=$(cat "$1")
  ns=$(ip netns identify "$pid" 2>/dev/null) || return 1
  case " $namespaces " in *" $ns "*) [ -n "$ns" ] && echo "$pid" ;; *) return 1 ;; esac
}

# ssh connection masters opened through the generated ssh_config (hand use).
if [ -f "$state/ssh_config" ]; then
  for h in emu-sender emu-receiver; do
    ssh -F "$state/ssh_config" -O exit "$h" >/dev/null 2>&1 && log "closed ssh master of $h"
  done
fi

for f in "$run/receiver/agent.pid" "$run/sender/capture.pid" "$state/pids/fpga-emu.pid" "$state/pids/fpga-emu2.pid" \
         "$state/pids/sshd-sender.pid" "$state/pids/sshd-receiver.pid"; do
  if pid=$(ours "$f"); then stop "$pid" "$(cat "/proc/$pid/comm" 2>/dev/null || echo process) ($(basename "$f"))"; fi
  rm -f "$f"
done

# Anything else still running in the namespaces (started over ssh, e.g. a tcpreplay), by pid.
for ns in $namespaces; do
  ip netns list | grep -qw "^$ns" || continue
  for pid in $(ip netns pids "$ns" 2>/dev/null); do
    stop "$pid" "$(cat "/proc/$pid/comm" 2>/dev/null || echo process) in $ns"
  done
done

for ns in $namespaces; do
  if ip netns list | grep -qw "^$ns"; then ip netns del "$ns" && log "deleted namespace $ns"; fi
done
# The veths die with their namespace ends; the bridge stays unless deleted.
for dev in emu-m-snd emu-m-rcv emu-mgmt; do
  ip link show dev "$dev" >/dev/null 2>&1 && ip link del "$dev" && log "deleted $dev"
done
rm -f "$run/fpga/ctl"

if [ "${1:-}" = "--purge" ]; then
  rm -rf "$state" "$run"
  log "removed $state and $run"
fi
log "down"
