# Send the run's trace with the sender's agent (`sender: agent`), stamping every probe as it is
# sent and every echo as it returns on the capture interface; it prints one `rtt` event and
# writes the run's records to the file the controller collects.
{{ sender_agent }} originate --port {{ sender_iface }} --rx-port {{ capture_iface }} --tx-core {{ replay_core }} --probe-format {{ probe_format }} --trace {{ trace }} --pps {{ pacing_pps }} --burst {{ burst }} --out {{ originate_file }}
