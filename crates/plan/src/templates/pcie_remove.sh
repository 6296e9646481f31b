{{ devbind }} -u {{ fpga_pci }} 2>/dev/null; for d in {{ fpga_pci }}; do echo 1 > /sys/bus/pci/devices/$d/remove; done; sleep 2
