taskset -c {{ replay_core }} tcpreplay -q -T nano -i {{ sender_iface }} --pps={{ pacing_pps }} {{ burst_args }} {{ trace }}
