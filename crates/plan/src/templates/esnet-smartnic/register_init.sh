# The ESnet stack's bring-up (esnet-smartnic-fw README.INSTALL.md, sn-cfg): both CMACs enabled,
# each host's DMA queues reset to one physical-function queue, and the switch set so that port 0's
# ingress goes through the P4 program (app) and port 1's through the bypass.
{{ sn_cfg }} configure port --state enable && {{ sn_cfg }} configure host --host-id 0 --reset-dma-queues --dma-queues pf:0:1 && {{ sn_cfg }} configure host --host-id 1 --reset-dma-queues --dma-queues pf:0:1 && {{ sn_cfg }} configure switch -i 0:physical:app -i 1:physical:bypass -e 0:physical -e 1:physical
