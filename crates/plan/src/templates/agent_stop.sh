pid=$(cat {{ agent_pidfile }}) && kill -TERM "$pid" && while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done && rm -f {{ agent_pidfile }}
