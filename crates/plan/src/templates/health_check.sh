{{ agent }} regs check --bar {{ bar_file }} --cmacs {{ cmacs }}
