{{ agent }} regs check --bar {{ bar_file }}
