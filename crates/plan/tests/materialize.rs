//! A loaded plan's traces made local with [`latency_plan::trace::materialize`], as a testbed
//! uploads them: loading and trace generation together, through the public API.

use std::path::Path;

use latency_plan::trace::{inspect, materialize};

#[test]
fn materializing_generates_each_trace_once() {
    let path = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../plans/smoke.yaml"));
    let (plan, _) = latency_plan::load(path, None).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("traces");
    let traces = materialize(&plan, &dir).unwrap();
    let names: Vec<&str> = traces.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["forward_1k.pcap", "checksum_1k.pcap"]);
    for (name, path) in &traces {
        assert_eq!(*path, dir.join(name));
        assert_eq!(inspect(path, latency_plan::ProbeFormat::Latencylab).unwrap().packets, 1000);
    }
    // A file already there is kept as it is.
    std::fs::write(&traces[0].1, b"kept").unwrap();
    assert_eq!(materialize(&plan, &dir).unwrap(), traces);
    assert_eq!(std::fs::read(&traces[0].1).unwrap(), b"kept");
}
