//! The agent as the sender (`sender: agent`): round trips on the simulator, recovering the
//! one-way latency of the paper's Forward; the commands the OCT testbed would run; and the
//! plans and inventories it refuses.

use std::path::Path;

use crate::cli::assert_invalid;
use crate::common::{orchestrate, run_steady, stderr, tmp_dir};

const PLAN: &str = "../plans/rtt.yaml";

#[test]
fn round_trips_on_the_simulator_recover_forwards_one_way_latency() {
    let dir = tmp_dir("rtt-sim");
    // The round trip's arithmetic is checked, not the scatter of bring-ups: that is left out.
    let s = run_steady(PLAN, &dir, &["--testbed", "sim"]);
    let rt = s.programs["forward"].round_trip.as_ref().expect("a round-trip summary");
    assert_eq!(rt.crossings, 1);
    // One way, Forward adds the paper's median (Table I: 149 ns; 500 probes, so ±1.5 ns).
    assert!((rt.one_way_ns.at(50.0).unwrap() - 149.0).abs() < 1.5, "{:?}", rt.one_way_ns);
    // The null path's round trip: 1.5 us of wire to the card, the trace's δ (17 ns), the echo's
    // 1.5 us back, and the mean poll phases of the two stamps taken after a dequeue (3 ns each).
    assert!((rt.null_rtt_ns - 3023.0).abs() < 3.0, "{}", rt.null_rtt_ns);
    assert!((rt.rtt_ns.at(50.0).unwrap() - 3023.0 - 149.0).abs() < 3.0, "{:?}", rt.rtt_ns);
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(report.contains("| forward | 3"), "the round-trip table: {report}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn on_the_oct_testbed_the_reflector_replaces_the_agent_and_the_originator_tcpreplay() {
    // As shipped, the OCT receiver captures with DPDK (the default backend), whose ports the
    // reflector cannot use.
    let o = orchestrate(&["plan", PLAN, "--testbed", "../testbeds/oct-u280.yaml"]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(err.contains("`backend` is dpdk: the reflector takes af-packet or af-xdp"), "{err}");
    assert!(err.contains("`reflect_port` is DPDK port 2"), "{err}");

    // With the kernel's netdevs: the reflector on the first FPGA port, echoing out of the reflect
    // NIC to the sender's ConnectX-5, which the originator listens on.
    let dir = tmp_dir("rtt-oct");
    let inv = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../testbeds/oct-u280.yaml"))
        .unwrap()
        .replace("receiver:\n", "receiver:\n  backend: af-packet\n")
        .replace("  reflect_port: \"2\"", "  reflect_port: enp134s0np1");
    assert!(inv.contains("backend: af-packet") && inv.contains("reflect_port: enp134s0np1"));
    let inv_path = dir.join("oct-netdevs.yaml");
    std::fs::write(&inv_path, inv).unwrap();
    let o = orchestrate(&["plan", PLAN, "--testbed", inv_path.to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let session = &v["sessions"][0];
    let step = |steps: &serde_json::Value, action: &str| {
        steps
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["action"] == action)
            .map(|s| s["command"].as_str().unwrap().to_string())
    };
    assert_eq!(step(&session["steps"], "agent_start"), None);
    let reflector = step(&session["steps"], "reflector_start").unwrap();
    for part in [
        "reflect --backend af-packet --port enp59s0f0 --core 4 --probe-format latencylab",
        "--tx-port enp134s0np1 --dst-mac b8:83:03:7a:e0:b8",
    ] {
        assert!(reflector.contains(part), "{part} in {reflector}");
    }
    let run = &session["runs"][0];
    assert_eq!(run["steps"].as_array().unwrap().len(), 1);
    let originate = step(&run["steps"], "originate").unwrap();
    for part in [
        " originate --port ",
        " --rx-port enp134s0np0 ",
        " --pps 500 --burst 1 ",
        "/captures/forward_s1-run01.arrows",
        "/traces/forward_500",
    ] {
        assert!(originate.contains(part), "{part} in {originate}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_agent_sender_refuses_what_it_cannot_combine_with() {
    assert_invalid(
        "tests/fixtures/bad/sender.yaml",
        &["tests/fixtures/bad/sender.yaml:3:75: `sender: agent` times round trips itself: it does not combine with \
           `reflect: true` (tcpreplay's probes reflected to the sender's clock)"],
    );
}
