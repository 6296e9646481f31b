rmmod onic 2>/dev/null; insmod {{ onic_module }} RS_FEC_ENABLED=0 && sleep 10 && for i in {{ fpga_ifaces }}; do ip link set "$i" up || exit 1; done && sleep 2
