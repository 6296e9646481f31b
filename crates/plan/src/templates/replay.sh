taskset -c {{ replay_core }} tcpreplay -q -T nano -i {{ sender_iface }} {{ pace_args }} {{ burst_args }} {{ trace }}
