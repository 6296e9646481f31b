# Received frames only (the replay may leave by the same port); untagged ones are
# ignored when the capture is joined. The capture is ready once tcpdump listens; a
# NIC without the time-stamp type asked for is an error (tcpdump itself would only
# warn and stamp with the host clock). A small snapshot and a 16 MiB ring keep every
# reflection even if tcpdump is not scheduled for a while.
mkdir -p "$(dirname {{ capture_file }})" && rm -f {{ capture_file }} && { setsid tcpdump -i {{ capture_iface }} -j {{ capture_tstamp }} -Q in --time-stamp-precision=nano --immediate-mode -s 512 -B 16384 -w {{ capture_file }} < /dev/null > /dev/null 2> {{ capture_file }}.log & echo $! > {{ capture_pidfile }}; } && for _ in $(seq 500); do if grep -q 'time stamp is not supported' {{ capture_file }}.log; then cat {{ capture_file }}.log >&2; kill "$(cat {{ capture_pidfile }})"; rm -f {{ capture_pidfile }}; exit 1; fi; grep -q 'listening on' {{ capture_file }}.log && exit 0; sleep 0.01; done; cat {{ capture_file }}.log >&2; exit 1
