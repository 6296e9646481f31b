kill -TERM $(cat {{ agent_pidfile }}) && rm -f {{ agent_pidfile }}
