//! Port pairs (`analysis.port_pairs`): probes captured on three ports of a two-hop path, each
//! declared pair analysed like the headline. On the simulator (two identical cards), each hop
//! recovers the paper's Forward and the path twice that; the OCT inventory as shipped cannot
//! capture a third port, and says why; mistakes in the pairs are reported where they are.

use crate::cli::assert_invalid;
use crate::common::{orchestrate, run_steady, stderr, tmp_dir};

const PLAN: &str = "../plans/two-hop.yaml";

#[test]
fn each_hop_of_a_two_card_path_recovers_forward_and_the_path_twice_that() {
    let dir = tmp_dir("two-hop-sim");
    // One bring-up checks the pairing of hops, not the scatter of bring-ups: that is left out.
    let s = run_steady(PLAN, &dir, &["--testbed", "sim"]);
    let p = &s.programs["forward"];
    // Table I: Forward's median is 149 ns (500 probes: ±1.5 ns); the second card runs the same
    // image, so the whole path adds twice that.
    let hop2 = &p.port_pairs["hop2"];
    let path = &p.port_pairs["path"];
    for (what, got, want) in [
        ("hop 1 (the headline)", p.latency_ns.at(50.0).unwrap(), 149.0),
        ("hop 2", hop2.latency_ns.at(50.0).unwrap(), 149.0),
        ("path", path.latency_ns.at(50.0).unwrap(), 298.0),
    ] {
        assert!((got - want).abs() < 3.0, "{what}: {got} vs {want}");
    }
    // Each pair has its own null calibration: the second hop's includes the link between the
    // cards (1.5 us on the simulator) and the trace's δ (17 ns), which the first hop's does not.
    assert!(
        (hop2.null_offset_ns - p.null_offset_ns - 1500.0).abs() < 5.0,
        "{} {}",
        hop2.null_offset_ns,
        p.null_offset_ns
    );
    // Forward forwards 70 % of the probes on both cards: the same probes reach the third port.
    assert_eq!(hop2.probes, p.probes);
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(report.contains("| forward | hop2 | 0 → 2 |") && report.contains("| forward | path | 1 → 2 |"), "{report}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_testbed_that_cannot_capture_the_ports_is_refused() {
    let o = orchestrate(&["plan", PLAN, "--testbed", "../testbeds/oct-u280.yaml"]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(err.contains("capture 3 ports but the receiver has 2 `fpga_ifaces`"), "{err}");
    assert!(err.contains("the dpdk backend cannot (it takes two)"), "{err}");
}

#[test]
fn port_pair_mistakes_are_reported_where_they_are() {
    assert_invalid(
        "tests/fixtures/bad/port-pairs.yaml",
        &[
            "tests/fixtures/bad/port-pairs.yaml:13:37: a port pair is [from, to]: two different capture ports (0 \
             pipeline, 1 bypass, 2, 3, … further hops)",
            "tests/fixtures/bad/port-pairs.yaml:13:55: 16 is out of range (0..=15)",
        ],
    );
}

#[test]
fn a_protocol_that_captures_two_ports_refuses_pairs_past_them() {
    assert_invalid(
        "tests/fixtures/bad/port-pairs-reflect.yaml",
        &["tests/fixtures/bad/port-pairs-reflect.yaml:13:3: `port_pairs` use 3 capture ports, but `protocol.reflect` \
           captures exactly two (pipeline and bypass)"],
    );
}
