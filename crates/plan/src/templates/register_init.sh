{{ agent }} regs init --bar {{ bar_file }}
