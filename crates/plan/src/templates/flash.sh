{{ config_fpga_as }} config-fpga reset {{ config_fpga_key }} && printf 'y\n' | xbflash2 program --spi --image {{ bitstream }} -d {{ qspi_pci }} --bar {{ qspi_bar }} {{ xbflash2_args }}
