# The Open-NIC shell's build status (system config register 0x0).
{{ agent }} regs read --bar {{ bar_file }} 0x0
