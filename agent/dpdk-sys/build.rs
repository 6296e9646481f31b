//! Finds the system DPDK with pkg-config, generates the bindings with bindgen (a tight allowlist:
//! only what the agent calls) and compiles the C wrappers of DPDK's static inline functions together
//! with `csrc/helpers.c` (rte_errno, mbuf data access, log stream).

use std::env;
use std::path::PathBuf;
use std::process::Command;

/// Functions the agent calls. Static inline ones get C wrappers (`wrap_static_fns`).
const FUNCTIONS: &[&str] = &[
    "rte_eal_init",
    "rte_eal_cleanup",
    "rte_thread_register",
    "rte_thread_unregister",
    "rte_lcore_id",
    "rte_socket_id",
    "rte_strerror",
    "rte_rdtsc_precise",
    "rte_get_tsc_hz",
    "rte_eth_dev_count_avail",
    "rte_eth_dev_is_valid_port",
    "rte_eth_dev_configure",
    "rte_eth_dev_adjust_nb_rx_tx_desc",
    "rte_eth_rx_queue_setup",
    "rte_eth_tx_queue_setup",
    "rte_eth_dev_start",
    "rte_eth_dev_stop",
    "rte_eth_dev_close",
    "rte_eth_promiscuous_enable",
    "rte_eth_dev_socket_id",
    "rte_eth_dev_info_get",
    "rte_eth_dev_get_name_by_port",
    "rte_eth_stats_get",
    "rte_eth_rx_burst",
    "rte_eth_tx_burst",
    "rte_pktmbuf_pool_create",
    "rte_pktmbuf_free",
    "rte_mempool_free",
    "rte_mempool_avail_count",
    "ldpdk_.*",
];

/// Types named in the agent (the functions above pull in what their signatures need).
const TYPES: &[&str] = &["rte_eth_conf", "rte_eth_dev_info", "rte_eth_stats", "rte_mbuf", "rte_mempool"];

/// Constants the agent uses.
const VARS: &[&str] = &[
    "RTE_MAX_ETHPORTS",
    "RTE_ETH_NAME_MAX_LEN",
    "RTE_MBUF_DEFAULT_BUF_SIZE",
    "RTE_MEMPOOL_CACHE_MAX_SIZE",
    "RTE_MAX_LCORE",
    "LCORE_ID_ANY",
    "SOCKET_ID_ANY",
];

/// The flags of `pkg-config --cflags libdpdk` that the pkg-config crate does not report: Debian's
/// `-include rte_config.h` and `-march=corei7` (any `-m…` machine flag).
fn extra_cflags() -> Vec<String> {
    let pkg_config = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".into());
    let out = Command::new(&pkg_config)
        .args(["--cflags", "libdpdk"])
        .output()
        .unwrap_or_else(|e| panic!("cannot run `{pkg_config} --cflags libdpdk`: {e}"));
    assert!(out.status.success(), "`{pkg_config} --cflags libdpdk` failed: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut words = text.split_whitespace();
    let mut flags = Vec::new();
    while let Some(w) = words.next() {
        if w == "-include" {
            if let Some(file) = words.next() {
                flags.push(w.to_string());
                flags.push(file.to_string());
            }
        } else if let Some(file) = w.strip_prefix("-include") {
            flags.extend(["-include".to_string(), file.to_string()]);
        } else if w.starts_with("-m") {
            flags.push(w.to_string());
        }
    }
    flags
}

fn main() {
    if env::var_os("CARGO_FEATURE_LINK").is_none() {
        return;
    }
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    let csrc = manifest.join("csrc");
    for f in ["wrapper.h", "helpers.h", "helpers.c"] {
        println!("cargo:rerun-if-changed={}", csrc.join(f).display());
    }
    println!("cargo:rerun-if-env-changed=PKG_CONFIG");

    // Emits the link search paths and `-lrte_*` libraries (shared: the EAL then loads the PMDs
    // from its default plugin directory, RTE_EAL_PMD_PATH, as dpdk-testpmd does).
    let dpdk = pkg_config::Config::new()
        .atleast_version("22.11")
        .probe("libdpdk")
        .unwrap_or_else(|e| panic!("libdpdk (DPDK >= 22.11) not found by pkg-config (apt install libdpdk-dev): {e}"));
    println!("cargo:rustc-env=LATENCY_DPDK_VERSION={}", dpdk.version);
    let extra = extra_cflags();
    let mut clang_args: Vec<String> = dpdk.include_paths.iter().map(|p| format!("-I{}", p.display())).collect();
    for (k, v) in &dpdk.defines {
        clang_args.push(match v {
            Some(v) => format!("-D{k}={v}"),
            None => format!("-D{k}"),
        });
    }
    clang_args.extend(extra.iter().cloned());
    clang_args.push(format!("-I{}", csrc.display()));

    let static_fns = out.join("static_fns");
    let mut builder = bindgen::Builder::default()
        .header(csrc.join("wrapper.h").to_string_lossy())
        .clang_args(&clang_args)
        .rust_target(bindgen::RustTarget::stable(85, 0).unwrap_or_else(|e| panic!("{e}")))
        .rust_edition(bindgen::RustEdition::Edition2024)
        .formatter(bindgen::Formatter::None)
        .generate_comments(false)
        .layout_tests(true)
        .derive_default(true)
        .derive_debug(false)
        .prepend_enum_name(false)
        .default_enum_style(bindgen::EnumVariation::Consts)
        .allowlist_recursively(true)
        .wrap_static_fns(true)
        .wrap_static_fns_path(&static_fns)
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new().rerun_on_header_files(false)));
    for f in FUNCTIONS {
        builder = builder.allowlist_function(f);
    }
    for t in TYPES {
        builder = builder.allowlist_type(t);
    }
    for v in VARS {
        builder = builder.allowlist_var(v);
    }
    // Reached through rte_mempool's ops table; the agent never touches them.
    builder =
        builder.opaque_type("rte_mempool_ops").opaque_type("rte_mempool_objhdr").opaque_type("rte_mempool_memhdr");
    let bindings = builder.generate().unwrap_or_else(|e| panic!("bindgen on csrc/wrapper.h failed: {e}"));
    bindings.write_to_file(out.join("bindings.rs")).unwrap_or_else(|e| panic!("writing bindings.rs: {e}"));

    let mut cc = cc::Build::new();
    cc.file(static_fns.with_extension("c"))
        .file(csrc.join("helpers.c"))
        .include(&csrc)
        .includes(&dpdk.include_paths)
        .warnings(false)
        .opt_level(2);
    for (k, v) in &dpdk.defines {
        cc.define(k, v.as_deref());
    }
    for f in &extra {
        cc.flag(f);
    }
    cc.compile("dpdk_sys_wrappers");
}
