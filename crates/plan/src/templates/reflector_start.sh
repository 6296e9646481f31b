# Start the receiver's reflector (`sender: agent`): it receives the pipeline copies on the card's
# first port and echoes each back to the sender's originator (out of the reflect NIC, addressed to
# the sender's capture NIC, when the inventory has them; else back out of the same port), detached
# like the agent, with the agent's pidfile and events file.
if [ -f {{ agent_pidfile }} ]; then kill -TERM "$(cat {{ agent_pidfile }})" 2> /dev/null; rm -f {{ agent_pidfile }}; fi; mkdir -p {{ session_dir }} && { setsid {{ agent }} reflect --backend {{ agent_backend }} --port {{ pipeline_iface }} --core {{ pipeline_core }} --probe-format {{ probe_format }} --pidfile {{ agent_pidfile }} {{ echo_args }} < /dev/null > {{ session_dir }}/events.jsonl 2> {{ session_dir }}/agent.log & }
