# Rescan and wait for the card's functions (ESnet's rescan_pcie_bus.sh: until .0 and .1 are back).
echo 1 > /sys/bus/pci/rescan && sleep 3 && for d in {{ fpga_pci }}; do test -e /sys/bus/pci/devices/"$d" || { echo "$d missing after rescan" >&2; exit 1; }; done
