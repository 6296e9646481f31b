# The ESnet SmartNIC shell has no kernel netdev driver: its host functions stay with vfio-pci and
# the stack's tools (sn-cfg, sn-p4) reach the card through its own server.
echo 'esnet-smartnic: no kernel driver to reload'
