//! DPDK EAL arguments from a host inventory: [`EalConfig`] (in `latency-proto`) and a function
//! taking its fields as arguments.

pub use latency_proto::eal::EalConfig;

/// The EAL arguments (without the program name) of [`EalConfig`] with these fields; `allow` are
/// the PCI functions to allow (receive ports, then the reflect port). See [`EalConfig::args`].
#[allow(clippy::too_many_arguments)]
pub fn eal_args_from_inventory(
    cores: &[u32],
    main_core: Option<u32>,
    numa_node: u32,
    allow: &[String],
    vdevs: &[String],
    no_huge: bool,
    memory_mb: Option<u32>,
    file_prefix: &str,
    drivers: &[String],
) -> Vec<String> {
    EalConfig {
        main_core,
        poller_cores: cores.to_vec(),
        numa_node,
        pci: allow.to_vec(),
        reflect_pci: None,
        vdevs: vdevs.to_vec(),
        no_huge,
        memory_mb,
        file_prefix: file_prefix.to_owned(),
        drivers: drivers.to_vec(),
        memory_channels: None,
    }
    .args()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_those_of_the_config() {
        let allow = ["0000:3b:00.0".to_string(), "0000:86:00.0".to_string()];
        let config = EalConfig {
            main_core: Some(2),
            poller_cores: vec![4, 6],
            numa_node: 1,
            pci: vec![allow[0].clone()],
            reflect_pci: Some(allow[1].clone()),
            memory_mb: Some(1024),
            file_prefix: "latency".into(),
            drivers: vec!["librte_net_qdma.so".into()],
            ..EalConfig::default()
        };
        let args =
            eal_args_from_inventory(&[4, 6], Some(2), 1, &allow, &[], false, Some(1024), "latency", &config.drivers);
        assert_eq!(args, config.args());
    }
}
