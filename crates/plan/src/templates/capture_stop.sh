# Stop the capture and wait until tcpdump has written its file and exited; its
# closing counts (captured, dropped by kernel) go to the step log.
p=$(cat {{ capture_pidfile }}) && kill -INT "$p" && for _ in $(seq 500); do s=$(awk '{print $3}' /proc/"$p"/stat 2>/dev/null); if [ -z "$s" ] || [ "$s" = Z ]; then rm -f {{ capture_pidfile }}; tail -n 3 {{ capture_file }}.log; exit 0; fi; sleep 0.01; done; echo "tcpdump $p did not stop" >&2; exit 1
