modprobe vfio-pci && {{ devbind }} -b vfio-pci {{ fpga_pci }}
