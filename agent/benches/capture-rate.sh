#!/usr/bin/env bash
# Sustained zero-loss capture rate of the agent, AF_PACKET and AF_XDP backends in the same run, on
# veth pairs in a private network namespace: both ports fed by tcpreplay at a fixed rate; for each
# backend, the highest rate at which every probe is recorded exactly once on both ports (no queue
# drops, no NIC or ring drops) is reported. Needs root, ip, tcpreplay.
# Usage: capture-rate.sh AGENT ORCHESTRATE [RATES...]
set -euo pipefail
agent=$1; orchestrate=$2; shift 2
rates=${*:-"50000 100000 200000 300000 400000"}
ns=agent-bench-$$
work=$(mktemp -d)
cleanup() { ip netns del "$ns" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
ip netns add "$ns"
for i in 0 1; do ip -n "$ns" link add s$i type veth peer name r$i; done
ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1
for d in lo s0 r0 s1 r1; do ip -n "$ns" link set "$d" up; done
probes=200000
"$orchestrate" trace generate --template checksum --count $probes --probe-id compact --out "$work/t.pcap" >/dev/null
for backend in ${BACKENDS:-af-packet af-xdp}; do
best=none
for rate in $rates; do
  rm -rf "$work/runs"; mkfifo "$work/ctl.$backend.$rate"
  ip netns exec "$ns" "$agent" capture --backend "$backend" --ports r0,r1 --cores 0,1 --probe-format compact \
     --out "$work/runs" < "$work/ctl.$backend.$rate" > "$work/events.$backend.$rate" &
  pid=$!
  exec 7>"$work/ctl.$backend.$rate"
  sleep 0.5
  echo "begin 1" >&7; sleep 0.2
  ip netns exec "$ns" tcpreplay -T nano -i s0 --pps=$rate "$work/t.pcap" >/dev/null &
  achieved=$(ip netns exec "$ns" tcpreplay -T nano -i s1 --pps=$rate "$work/t.pcap" | grep -o '[0-9.]* pps' | head -1)
  wait %2 2>/dev/null || true
  sleep 0.5
  echo "end 1" >&7; sleep 0.5
  exec 7>&-; wait $pid
  end=$(grep '"event":"end"' "$work/events.$backend.$rate")
  field() { echo "$end" | grep -o "\"$1\":[0-9]*" | cut -d: -f2; }
  matched=$(field matched); dropped=$(field dropped); nic=$(field nic_drops)
  only=$(( $(field pipeline_only) + $(field bypass_only) ))
  lost=$(( probes - matched ))
  echo "bench-agent $backend: $rate pps per port x 2 ports (tcpreplay achieved $achieved), $probes probes: matched $matched, one-port-only $only, queue drops $dropped, NIC/ring drops $nic, lost $lost"
  if [ "$lost" -eq 0 ] && [ "$dropped" -eq 0 ] && [ "$nic" -eq 0 ]; then best="$achieved per port (tcpreplay set to $rate)"; fi
done
echo "bench-agent $backend: zero loss up to $best; goal >= 100000 pps per port"
done
