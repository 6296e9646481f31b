echo '' > /sys/bus/pci/devices/{{ fpga_pf0 }}/reset_method
