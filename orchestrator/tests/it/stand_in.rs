//! Published traces and their stand-ins: what a plan says when the pcap it names is absent, on
//! the simulator and on a real testbed.

use crate::cli::assert_invalid;
use crate::common::{orchestrate, stderr};

#[test]
fn an_absent_published_trace_is_replaced_by_its_stand_in_except_on_real_hardware() {
    let plan = "tests/fixtures/good/stand-in.yaml";
    let bad = "tests/fixtures/bad/stand-in.yaml";
    assert_invalid(
        bad,
        &[
            "tests/fixtures/bad/stand-in.yaml:7:62: a frame of 59 B is too short: at least 60 B hold its headers, the probe ids and Ethernet's 60 B minimum",
            "tests/fixtures/bad/stand-in.yaml:9:54: 4095 is out of range (1..=4094)",
            "tests/fixtures/bad/stand-in.yaml:10:15: `stand_in` replaces an absent `pcap`; a generated trace needs none",
            "tests/fixtures/bad/stand-in.yaml:12:11: file not found: ../traces/not-published.pcap (looked for tests/fixtures/traces/not-published.pcap)",
            "tests/fixtures/bad/stand-in.yaml:17:17: undefined trace `smal` (did you mean `small`?)",
        ],
    );

    // The dry run on the simulator: the stand-in is said, the null image runs with `null_trace`.
    let o = orchestrate(&["plan", plan, "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let groups: Vec<(&str, &str)> = v["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["program"].as_str().unwrap(), s["trace"].as_str().unwrap()))
        .collect();
    assert_eq!(groups, [("p", "absent"), ("null-published", "published")]);
    assert_eq!(v["sessions"][0]["probes"], 50, "the stand-in's probes");
    let notes = v["stand_ins"].as_array().unwrap();
    assert_eq!(notes.len(), 1, "only the absent trace: {notes:?}");
    assert_eq!(
        notes[0],
        "trace `absent`: tests/fixtures/traces/not-published.pcap is not here, so a generated stand-in replaces it \
         (template forward, 50 probes, 90 B frames, VLAN 7); results with it do not reproduce the published measurement"
    );

    // On the OCT testbed the study refuses to start, at the trace, before creating anything.
    let oct = ["--testbed", "../testbeds/oct-u280.yaml"];
    let out = crate::common::tmp("stand-in-oct");
    let o = orchestrate(&[&["run", plan, "--out", out.to_str().unwrap()][..], &oct[..]].concat());
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(
        stderr(&o),
        "tests/fixtures/good/stand-in.yaml:11:5: trace `absent`: file not found: tests/fixtures/traces/not-published.pcap; \
         testbed `oct-u280` replays published traces only, never a stand-in (put the file there)\n1 problem found\n"
    );
    assert!(!out.exists());
    // Its dry run and validation say so without failing.
    let o = orchestrate(&[&["plan", plan][..], &oct[..]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("stand-in.yaml:11:5: trace `absent`: file not found"));

    // On the simulator the study runs, says so on the console, in provenance and in the report,
    // and its frames are the stand-in's.
    let out = crate::common::tmp("stand-in-sim");
    let o = orchestrate(&["run", plan, "--out", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("stand-in: trace `absent`: tests/fixtures/traces/not-published.pcap is not here"));
    let prov: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("provenance.json")).unwrap()).unwrap();
    assert_eq!(prov["traces"]["absent"]["stand_in"]["generate"]["frame_len"], 90);
    assert_eq!(prov["traces"]["absent"]["stand_in"]["pcap"], "tests/fixtures/traces/not-published.pcap");
    assert!(prov["traces"]["published"]["pcap"].is_object(), "the file that is here is replayed");
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("> **Stand-in trace.** trace `absent`"), "{md}");
    let (batches, _) = latency_results::runfile::read(&out.join("data/program=p/session=1/run=1.parquet")).unwrap();
    let lens: std::collections::BTreeSet<u16> = batches
        .iter()
        .flat_map(|b| {
            let col = b.column_by_name("frame_len").unwrap();
            let col = col.as_any().downcast_ref::<arrow_array::UInt16Array>().unwrap();
            col.values().to_vec()
        })
        .collect();
    assert_eq!(lens, [90].into());
    let summary: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["programs"]["p"]["null_trace"], "published", "{}", summary["programs"]["p"]);
    assert_eq!(summary["nulls"]["published"]["group"], "null-published");
    std::fs::remove_dir_all(&out).unwrap();
}
