{{ config_fpga_as }} config-fpga boot {{ config_fpga_key }} && sleep 5
