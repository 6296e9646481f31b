//! Replay modes other than even pacing: the probes at their trace's own gaps, sped up or slowed
//! down (`timing: trace`, `multiplier`), each run checked against the rate that asks for; and the
//! run check on frames the receiver's NIC dropped.

use std::path::Path;

use latency_plan::Generated;
use latency_plan::ProbeFormat;
use latency_plan::TraceTemplate;
use latency_results::event::Event;
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};

use crate::common::{orchestrate, stderr, tmp, tmp_dir};

const PLAN: &str = "tests/fixtures/good/trace-timing.yaml";

fn plan_json(plan: &str, testbed: &str) -> serde_json::Value {
    let o = orchestrate(&["plan", plan, "--testbed", testbed, "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn trace_timing_replays_at_the_traces_gaps_times_the_multiplier_and_the_run_checks_hold_it_to_that() {
    // The trace's 2 ms gaps four times as fast: every run expects 2,000 pps, and tcpreplay is
    // asked for the trace's timing (`--multiplier=4`), not a rate.
    let v = plan_json(PLAN, "../testbeds/oct-u280.yaml");
    for run in v["sessions"][0]["runs"].as_array().unwrap() {
        assert_eq!(run["pacing_pps"], 2000);
        let replay = run["steps"].as_array().unwrap().iter().find(|s| s["action"] == "replay").unwrap();
        let command = replay["command"].as_str().unwrap();
        assert!(command.contains(" --multiplier=4 ") && !command.contains("--pps"), "{command}");
    }

    let dir = tmp("trace-timing");
    let o = orchestrate(&["run", PLAN, "--out", dir.to_str().unwrap(), "--quiet"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let journal = latency_results::journal::read(&dir.join("journal.jsonl")).unwrap();
    let finished: Vec<_> = journal.iter().filter(|e| matches!(e.event, Event::RunFinished { .. })).collect();
    assert_eq!(finished.len(), 4, "2 runs of the program and of its null");
    for e in finished {
        let Event::RunFinished { pacing, .. } = &e.event else { unreachable!() };
        let pps = pacing.receiver_pps.unwrap();
        assert!((pps - 2000.0).abs() < 2.0, "{pps} pps seen by the receiver");
    }

    // A sender 10 % slow fails every run's check against the 2,000 pps the timing asks for.
    let slow = tmp("trace-timing-slow");
    let o = orchestrate(&[
        "run",
        PLAN,
        "--out",
        slow.to_str().unwrap(),
        "--sim-model",
        "tests/fixtures/good/slow-sender.yaml",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("pacing 1800.0 pps seen by the sender, -10.0 % off the planned 2000 pps"),
        "{}",
        stderr(&o)
    );
    for d in [dir, slow] {
        std::fs::remove_dir_all(d).unwrap();
    }
}

#[test]
fn a_pcaps_rate_is_its_packets_over_its_time_stamps() {
    // Three probes stamped 0, 1 and 5 ms: 2 gaps in 5 ms, 400 pps; at half speed, 200 pps.
    let dir = tmp_dir("uneven");
    let spec = Generated::new(TraceTemplate::Forward, 3, ProbeFormat::Latencylab);
    let header = PcapHeader { ts_resolution: pcap_file::TsResolution::NanoSecond, ..PcapHeader::default() };
    let mut w = PcapWriter::with_header(Vec::new(), header).unwrap();
    for (id, ms) in [(1, 0), (2, 1), (4, 5)] {
        let f = latency_plan::trace::frame(&spec, id).unwrap();
        w.write_packet(&PcapPacket::new(std::time::Duration::from_millis(ms), f.len() as u32, &f)).unwrap();
    }
    std::fs::write(dir.join("uneven.pcap"), w.into_writer()).unwrap();
    let plan = std::fs::read_to_string(PLAN)
        .unwrap()
        .replace("multiplier: 4", "multiplier: 0.5")
        .replace("generate: { template: forward, count: 2000, probe_id: latencylab }", "pcap: uneven.pcap");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let plan = plan.replace("../../../../bitstreams", root.join("bitstreams").to_str().unwrap());
    let path = dir.join("plan.yaml");
    std::fs::write(&path, plan).unwrap();
    let v = plan_json(path.to_str().unwrap(), "sim");
    assert_eq!(v["sessions"][0]["runs"][0]["pacing_pps"], 200);
}

#[test]
fn timing_mistakes_are_reported_at_their_keys() {
    crate::cli::assert_invalid(
        "tests/fixtures/bad/timing.yaml",
        &[
            "tests/fixtures/bad/timing.yaml:3:62: `pacing_pps` is for `timing: pps`: with `timing: trace` the trace's time stamps pace the probes",
        ],
    );
}

#[test]
fn a_run_whose_receiver_nic_dropped_frames_fails_its_checks() {
    let dir = tmp("nic-drops");
    let o = orchestrate(&[
        "run",
        PLAN,
        "--out",
        dir.to_str().unwrap(),
        "--sim-model",
        "tests/fixtures/good/nic-drops.yaml",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("the receiver's NICs or capture rings dropped ")
            && err.contains(" frames before the agent saw them"),
        "{err}"
    );
    let journal = latency_results::journal::read(&dir.join("journal.jsonl")).unwrap();
    let failed = journal.iter().filter(|e| matches!(e.event, Event::RunFailed { .. })).count();
    assert!(failed >= 1, "{failed} runs failed");
    std::fs::remove_dir_all(dir).unwrap();
}
