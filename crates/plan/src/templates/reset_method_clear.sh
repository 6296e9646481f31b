# An empty reset_method keeps vfio-pci's bus reset from killing the shell.
echo '' > {{ fpga_pf0_sysfs }}/reset_method
