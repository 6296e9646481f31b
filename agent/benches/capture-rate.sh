#!/usr/bin/env bash
# Sustained zero-loss capture rate of the agent (AF_PACKET backend) on veth pairs in a private
# network namespace: both ports fed by tcpreplay at a fixed rate; the highest rate at which every
# probe is recorded exactly once on both ports is reported. Needs root, ip, tcpreplay.
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
best=0
for rate in $rates; do
  rm -rf "$work/runs"; mkfifo "$work/ctl.$rate"
  ip netns exec "$ns" "$agent" capture --backend af-packet --ports r0,r1 --cores 0,1 --probe-format compact \
     --out "$work/runs" < "$work/ctl.$rate" > "$work/events.$rate" &
  pid=$!
  exec 7>"$work/ctl.$rate"
  sleep 0.5
  echo "begin 1" >&7; sleep 0.2
  ip netns exec "$ns" tcpreplay -T nano -i s0 --pps=$rate "$work/t.pcap" >/dev/null &
  achieved=$(ip netns exec "$ns" tcpreplay -T nano -i s1 --pps=$rate "$work/t.pcap" | grep -o '[0-9.]* pps' | head -1)
  wait %2 2>/dev/null || true
  sleep 0.5
  echo "end 1" >&7; sleep 0.5
  exec 7>&-; wait $pid
  end=$(grep '"event":"end"' "$work/events.$rate")
  matched=$(echo "$end" | grep -o '"matched":[0-9]*' | cut -d: -f2)
  dropped=$(echo "$end" | grep -o '"dropped":[0-9]*' | cut -d: -f2)
  only=$(( $(echo "$end" | grep -o '"pipeline_only":[0-9]*' | cut -d: -f2) + $(echo "$end" | grep -o '"bypass_only":[0-9]*' | cut -d: -f2) ))
  lost=$(( probes - matched ))
  echo "bench-agent: $rate pps per port x 2 ports (tcpreplay achieved $achieved), $probes probes: matched $matched, one-port-only $only, queue drops $dropped, lost $lost"
  if [ "$lost" -eq 0 ] && [ "$dropped" -eq 0 ]; then best="$achieved per port (tcpreplay set to $rate)"; fi
done
echo "bench-agent: zero loss up to $best; goal >= 100000 pps per port"
