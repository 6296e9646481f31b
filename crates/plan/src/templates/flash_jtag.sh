# The Tcl script is written into the work folder and gets the image and the device
# as arguments, so that no value is ever spliced into Tcl.
printf '%s\n' 'open_hw_manager' 'connect_hw_server' 'open_hw_target' 'set dev [lindex [get_hw_devices [lindex $argv 1]] 0]' 'current_hw_device $dev' 'set_property PROGRAM.FILE [lindex $argv 0] $dev' 'program_hw_devices $dev' 'close_hw_manager' > {{ workdir }}/program-jtag.tcl && {{ vivado }} -mode batch -nojournal -nolog -notrace -source {{ workdir }}/program-jtag.tcl -tclargs {{ bitstream }} {{ jtag_device }}
