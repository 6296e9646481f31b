# Where images are loaded over JTAG (`flash_methods` lists `jtag`), a readback first reads the
# configured image's USERCODE through hw_server, as ESnet's check_fpga_version.sh does
# (`REGISTER.USERCODE.SLR0` of the hardware manager's device), and prints it as a JSON line,
# `{"usercode":"0x…"}`; the shell's readback follows on the next line. The Tcl script is written
# into the work folder and gets every value as an argument, so that none is spliced into Tcl.
printf '%s\n' 'open_hw_manager' 'connect_hw_server -url [lindex $argv 1]' 'current_hw_target [lindex [get_hw_targets [format {*/xilinx_tcf/Xilinx/%s} [lindex $argv 2]]] 0]' 'open_hw_target' 'set dev [lindex [get_hw_devices [lindex $argv 0]] 0]' 'puts "\{\"usercode\":\"[get_property REGISTER.USERCODE.SLR0 $dev]\"\}"' 'close_hw_manager' > {{ workdir }}/read-usercode.tcl && {{ vivado }} -mode batch -nojournal -nolog -notrace -source {{ workdir }}/read-usercode.tcl -tclargs {{ jtag_device }} {{ hw_server }} {{ jtag_target }}
