# What the card runs: the Open-NIC shell's build timestamp (system config register 0x0), as JSON.
{{ agent }} regs identity --bar {{ bar_file }}
