//! Black-box tests of the `orchestrate` binary: exact diagnostics and exit codes for broken plans,
//! and the dry run of the paper's study.

use crate::common::{orchestrate, part_runs_here, runs_here, stderr};
use std::path::Path;
use std::process::Command;

pub(crate) fn assert_invalid(plan: &str, expected: &[&str]) {
    let o = orchestrate(&["validate", plan]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let mut want = expected.join("\n");
    let plural = if expected.len() == 1 { "" } else { "s" };
    want.push_str(&format!("\n{} problem{plural} found\n", expected.len()));
    assert_eq!(stderr(&o), want);
}

#[test]
fn wrong_types_ranges_and_unknown_keys_are_all_reported() {
    assert_invalid(
        "tests/fixtures/bad/types.yaml",
        &[
            "tests/fixtures/bad/types.yaml:4:13: 0 is out of range (1..=1000)",
            "tests/fixtures/bad/types.yaml:5:9: expected an integer, found a string",
            "tests/fixtures/bad/types.yaml:7:3: unknown key `idle_gap` (did you mean `idle_gap_s`?)",
            "tests/fixtures/bad/types.yaml:17:14: quantiles must be strictly increasing",
            "tests/fixtures/bad/types.yaml:18:24: -1 is out of range (0..=1000000)",
            "tests/fixtures/bad/types.yaml:19:1: unknown key `reprot` (did you mean `report`?)",
        ],
    );
}

#[test]
fn references_files_checksums_names_and_calibration_are_all_reported() {
    assert_invalid(
        "tests/fixtures/bad/references.yaml",
        &[
            "tests/fixtures/bad/references.yaml:8:11: sha256 mismatch for tests/fixtures/good/abc.pcap: expected 0d00000000000000000000000000000000000000000000000000000000000000, file has ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            "tests/fixtures/bad/references.yaml:11:11: file not found: missing.pcap (looked for tests/fixtures/bad/missing.pcap)",
            "tests/fixtures/bad/references.yaml:17:11: duplicate program name `p`",
            "tests/fixtures/bad/references.yaml:22:12: undefined trace `t9` (did you mean `t1`?)",
            "tests/fixtures/bad/references.yaml:24:5: program `r`: its trace `t2` has no null calibration (add `null: <null bitstream manifest>`, or run uncalibrated with `analysis.calibration: none`)",
            "tests/fixtures/bad/references.yaml:27:11: `bad name` is not a safe name: use letters, digits, `_` and `-`, starting with a letter (at most 64)",
            "tests/fixtures/bad/references.yaml:28:16: file not found: ../good/missing.yaml (looked for tests/fixtures/good/missing.yaml)",
            "tests/fixtures/bad/references.yaml:31:16: invalid bitstream manifest tests/fixtures/good/tiny.yaml",
            "tests/fixtures/bad/references.yaml:33:11: tests/fixtures/good/prog.yaml is not a null bitstream (`null: true` in its manifest)",
            "tests/fixtures/good/tiny.yaml:2:7: sha256 mismatch for tests/fixtures/good/tiny.bit: expected 0c00000000000000000000000000000000000000000000000000000000000000, file has ca54818eec0411d702142a26092e8e698bf0ec5dfe765f0e9fdb3810ce90c66c",
        ],
    );
}

#[test]
fn inventory_problems_name_the_inventory_file() {
    assert_invalid(
        "tests/fixtures/bad/uses-inventory.yaml",
        &[
            "tests/fixtures/bad/inventory.yaml:7:34: 70000 is out of range (1..=65535)",
            // At the list element (8:14), no longer at the list.
            "tests/fixtures/bad/inventory.yaml:8:14: `3b:00.0` is not a PCI address (DDDD:BB:DD.F)",
            "tests/fixtures/bad/inventory.yaml:12:17: `poller_cores` needs one core per port (2), found 1",
            "tests/fixtures/bad/inventory.yaml:14:10: template of `flash` uses unknown variable `bitstrem` (did you mean `bitstream`?)",
            "tests/fixtures/bad/inventory.yaml:15:3: unknown action `reboot` (did you mean `boot`?)",
            "tests/fixtures/bad/inventory.yaml:16:11: template of `replay`: unclosed `{{` in template at `{{ trace`",
        ],
    );
}

#[test]
fn user_templates_with_placeholders_in_quotes_or_glued_to_text_are_rejected() {
    let word = "must be a whole shell word (it is substituted shell-quoted)";
    let expected = [
        format!(
            "tests/fixtures/bad/templates.yaml:15:11: template of `replay`: placeholder `{{{{ sender_iface }}}}` {word}; remove the surrounding quotes"
        ),
        format!(
            "tests/fixtures/bad/templates.yaml:16:9: template of `boot`: placeholder `{{{{ config_fpga_key }}}}` {word}; separate it from `x` before it"
        ),
        // `table` is a list (none, or the table file).
        "tests/fixtures/bad/templates.yaml:17:15: template of `table_load`: placeholder `{{ table }}` is a list of words and must stand alone; remove the surrounding quotes".to_owned(),
        "tests/fixtures/bad/templates.yaml:18:16: template of `pcie_remove`: placeholder `{{ fpga_pci }}` is a list of words and must stand alone; separate it from `/x` after it".to_owned(),
        format!(
            "tests/fixtures/bad/templates.yaml:19:17: template of `capture_stop`: placeholder `{{{{ capture_pidfile }}}}` {word}; use `$(…)` instead of backquotes"
        ),
    ];
    assert_invalid("tests/fixtures/bad/templates.yaml", &expected.iter().map(String::as_str).collect::<Vec<_>>());
}

#[test]
fn inventory_names_addresses_and_ports_are_checked_each_at_its_element() {
    assert_invalid(
        "tests/fixtures/bad/hosts.yaml",
        &[
            "tests/fixtures/bad/hosts.yaml:4:17: ssh alias `-oProxyCommand=reboot` must not start with `-` (ssh would read it as an option)",
            "tests/fixtures/bad/hosts.yaml:5:14: interface name `eth0/1` must not contain `/`, `:`, whitespace or control characters",
            "tests/fixtures/bad/hosts.yaml:7:18: interface name `a-very-long-interface-name` is longer than 15 bytes",
            "tests/fixtures/bad/hosts.yaml:9:16: ssh host `-r` must not start with `-` (ssh would read it as an option)",
            "tests/fixtures/bad/hosts.yaml:9:26: ssh user `u ser` must not contain whitespace or control characters",
            "tests/fixtures/bad/hosts.yaml:9:41: 0 is out of range (1..=65535)",
            "tests/fixtures/bad/hosts.yaml:10:14: `0000:3b:20.0`: device 0x20 is out of range (00..=1f)",
            "tests/fixtures/bad/hosts.yaml:10:30: `0000:3b:00.8`: function 8 is out of range (0..=7)",
            "tests/fixtures/bad/hosts.yaml:10:46: `3b:00.0` is not a PCI address (DDDD:BB:DD.F)",
            "tests/fixtures/bad/hosts.yaml:11:13: `3b:00.0 && reboot` is not a PCI address ([DDDD:]BB:DD.F)",
            "tests/fixtures/bad/hosts.yaml:14:28: interface name `..` cannot be `.` or `..`",
            "tests/fixtures/bad/hosts.yaml:14:34: interface name `r\\n0` must not contain `/`, `:`, whitespace or control characters",
            "tests/fixtures/bad/hosts.yaml:17:17: `reflect_port` is empty: give the reflect NIC's DPDK port id or an interface name",
        ],
    );
}

#[test]
fn validate_recognises_inventories_and_bitstream_manifests() {
    let o = orchestrate(&[
        "validate",
        "../testbeds/oct-u280.yaml",
        "../bitstreams/forward.yaml",
        "../bitstreams/golden_nic.yaml",
        "../plans/smoke.yaml",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        stderr(&o),
        "../testbeds/oct-u280.yaml: ok (inventory `oct-u280`, 2 FPGA functions, 0 actions overridden)\n\
         ../bitstreams/forward.yaml: ok (bitstream manifest `forward`, qspi, image not present)\n\
         ../bitstreams/golden_nic.yaml: ok (bitstream manifest `golden_nic`, null image, qspi, image not present)\n\
         ../plans/smoke.yaml: ok (study `smoke`, 2 programs)\n"
    );
}

#[test]
fn pcap_traces_are_read_through_by_validate() {
    let expected = [
        "tests/fixtures/bad/traces.yaml:6:11: tests/fixtures/traces/capture.pcapng: a pcapng file, not a classic pcap: convert it with `editcap -F pcap IN.pcapng OUT.pcap`",
        "tests/fixtures/bad/traces.yaml:8:11: tests/fixtures/traces/notes.pcap: not a pcap file (magic number 0x626f7270)",
        "tests/fixtures/bad/traces.yaml:10:11: tests/fixtures/traces/empty.pcap: the file is empty (0 bytes), not a pcap",
        "tests/fixtures/bad/traces.yaml:12:11: tests/fixtures/traces/header-only.pcap: the trace holds no packets",
        "tests/fixtures/bad/traces.yaml:14:11: tests/fixtures/traces/truncated.pcap: truncated at byte 312: record 3 has 134 of its 144 bytes (2 complete records read)",
        "tests/fixtures/bad/traces.yaml:16:11: tests/fixtures/traces/duplicates.pcap: 1 probes repeat an id seen before (ids 2)",
        "tests/fixtures/bad/traces.yaml:18:11: tests/fixtures/traces/no-probes.pcap: no packet carries a latencylab probe id",
        "tests/fixtures/bad/traces.yaml:20:11: tests/fixtures/traces: cannot read: not a regular file (a directory)",
    ];
    assert_invalid("tests/fixtures/bad/traces.yaml", &expected);

    // `run` loads the plan the same way: the same diagnostics, before anything is created.
    let out = std::env::temp_dir().join(format!("orchestrate-bad-traces-{}", std::process::id()));
    let o = orchestrate(&["run", "tests/fixtures/bad/traces.yaml", "--testbed", "sim", "--out", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(stderr(&o), format!("{}\n8 problems found\n", expected.join("\n")));
    assert!(!out.exists());

    // A sound pcap trace validates, and the schedule replays its three probes.
    let o = orchestrate(&["validate", "tests/fixtures/good/pcap-trace.yaml"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = orchestrate(&["plan", "tests/fixtures/good/pcap-trace.yaml", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["predicted_seconds"]["replay"].as_f64(), Some(2.0 * 2.0 * 3.0 / 500.0));
}

#[test]
fn trace_inspect_reports_unreadable_input_as_invalid() {
    for (file, message) in [
        ("truncated.pcap", "truncated at byte 312: record 3 has 134 of its 144 bytes (2 complete records read)"),
        ("empty.pcap", "the file is empty (0 bytes), not a pcap"),
        ("capture.pcapng", "a pcapng file, not a classic pcap: convert it with `editcap -F pcap IN.pcapng OUT.pcap`"),
        ("notes.pcap", "not a pcap file (magic number 0x626f7270)"),
        ("", "cannot read: not a regular file (a directory)"),
    ] {
        let path = format!("tests/fixtures/traces/{file}");
        let path = path.trim_end_matches('/');
        let o = orchestrate(&["trace", "inspect", path]);
        assert_eq!((o.status.code(), stderr(&o)), (Some(2), format!("error: {path}: {message}\n")));
        assert!(o.stdout.is_empty());
    }
    // Readable traces with problems still exit 1, with the report on stdout.
    let o = orchestrate(&["trace", "inspect", "tests/fixtures/traces/duplicates.pcap"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stderr(&o), "tests/fixtures/traces/duplicates.pcap: 1 probes repeat an id seen before (ids 2)\n");
}

#[test]
fn trace_generate_refuses_a_count_of_zero() {
    let out = std::env::temp_dir().join(format!("orchestrate-zero-{}.pcap", std::process::id()));
    let o =
        orchestrate(&["trace", "generate", "--template", "forward", "--count", "0", "--out", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("invalid value '0' for '--count <COUNT>': 0 is not in 1..=10000000"), "{}", stderr(&o));
    assert!(!out.exists());
}

#[test]
fn trace_generate_takes_a_frame_size_and_a_vlan() {
    let out = crate::common::tmp("sized.pcap");
    let generate = |extra: &[&str]| {
        let base = ["trace", "generate", "--template", "five_tuple", "--count", "20", "--out", out.to_str().unwrap()];
        orchestrate(&[&base[..], extra].concat())
    };
    let o = generate(&["--frame-size", "212", "--vlan", "100"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let inspected = latency_plan::trace::inspect(&out, latency_plan::ProbeFormat::Latencylab).unwrap();
    assert_eq!((inspected.frame_len_min, inspected.frame_len_max, inspected.probes), (Some(212), Some(212), 20));
    let first = &std::fs::read(&out).unwrap()[24 + 16..][..16];
    assert_eq!(&first[12..16], &[0x81, 0x00, 0x00, 100], "tagged with VLAN 100");
    std::fs::remove_file(&out).unwrap();
    let o = generate(&["--frame-size", "59"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--frame-size: a frame of 59 B is too short: at least 60 B hold its headers, the probe ids and Ethernet's 60 B minimum"));
    let o = generate(&["--vlan", "4095"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("`4095` is no VLAN id (1..=4094) nor `none`"), "{}", stderr(&o));
    assert!(!out.exists());
}

#[test]
fn oversized_schedules_and_files_and_non_files_are_rejected() {
    assert_invalid(
        "tests/fixtures/bad/huge.yaml",
        &["tests/fixtures/bad/huge.yaml:6:3: schedule of 30000000 runs exceeds the limit of 100000: 3 session groups \
           (programs and null calibrations) × 1000 sessions × 10000 runs"],
    );
    let o = orchestrate(&["plan", "tests/fixtures/bad/huge.yaml"]);
    assert_eq!(o.status.code(), Some(2));

    assert_invalid("/dev/zero", &["/dev/zero:1:1: cannot read: a device, not a YAML file"]);
    let big = std::env::temp_dir().join(format!("orchestrate-big-{}.yaml", std::process::id()));
    let mut text = std::fs::read_to_string("../plans/smoke.yaml").unwrap();
    text.push_str(&format!("#{}\n", "x".repeat(1 << 20)));
    std::fs::write(&big, text).unwrap();
    let big = big.to_str().unwrap();
    let expected = format!("{big}:1:1: cannot read: larger than 1 MiB: not a YAML file");
    assert_invalid(big, &[expected.as_str()]);
    let o = orchestrate(&["run", "../plans/smoke.yaml", "--testbed", big]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).starts_with(&format!("{big}:1:1: cannot read: larger than 1 MiB")), "{}", stderr(&o));
    std::fs::remove_file(big).unwrap();
}

#[test]
fn yaml_syntax_errors_have_a_position() {
    let o = orchestrate(&["validate", "tests/fixtures/bad/syntax.yaml"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stderr(&o),
        "tests/fixtures/bad/syntax.yaml:3:1: YAML syntax error: while parsing a flow sequence, expected ',' or ']'\n1 problem found\n"
    );
}

#[test]
fn missing_plan_file_is_invalid_input() {
    let o = orchestrate(&["validate", "no/such/plan.yaml"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).starts_with("no/such/plan.yaml:1:1: cannot read: "), "{}", stderr(&o));
}

#[test]
fn shipped_plans_validate() {
    let o = orchestrate(&["validate", "../plans/paper.yaml", "../plans/smoke.yaml"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

fn paper_plan_json(testbed: Option<&str>) -> serde_json::Value {
    let mut args = vec!["plan", "../plans/paper.yaml", "--json"];
    if let Some(t) = testbed {
        args.extend(["--testbed", t]);
    }
    let o = orchestrate(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    serde_json::from_slice(&o.stdout).expect("plan --json prints JSON")
}

#[test]
fn paper_plan_has_40_sessions_400_runs_and_16000_s_of_replay() {
    let v = paper_plan_json(None);
    let sessions = v["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 40);
    let runs: usize = sessions.iter().map(|s| s["runs"].as_array().unwrap().len()).sum();
    assert_eq!(runs, 400);
    assert_eq!(v["predicted_seconds"]["replay"].as_f64(), Some(16_000.0));
    for key in ["idle_gaps", "bring_up", "total"] {
        assert!(v["predicted_seconds"][key].as_f64().unwrap() > 0.0, "{key}");
    }
    // 4 programs x 5 sessions, then the null image with each of the 4 traces x 5 sessions.
    let nulls: Vec<&str> = sessions[20..].iter().map(|s| s["program"].as_str().unwrap()).collect();
    assert!(nulls.iter().all(|p| p.starts_with("null-")));
    let null_traces: std::collections::BTreeSet<&str> =
        sessions[20..].iter().map(|s| s["trace"].as_str().unwrap()).collect();
    assert_eq!(null_traces.len(), 4);
    for s in sessions {
        for key in ["program", "bitstream", "trace"] {
            assert!(s[key].is_string(), "{key}");
        }
        let steps = s["steps"].as_array().unwrap();
        assert!(!steps.is_empty());
        let run_steps = s["runs"].as_array().unwrap().iter().flat_map(|r| r["steps"].as_array().unwrap().iter());
        for st in steps.iter().chain(run_steps) {
            let cmd = st["command"].as_str().unwrap();
            assert!(!cmd.is_empty() && !cmd.contains("{{") && !cmd.contains("unrenderable"), "{cmd}");
            assert!(st["host"] == "sender" || st["host"] == "receiver");
        }
    }
}

#[test]
fn paper_plan_renders_the_documented_oct_commands() {
    let v = paper_plan_json(None);
    let first = &v["sessions"][0];
    let cmd = |action: &str| -> String {
        first["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["action"] == action)
            .map(|s| s["command"].as_str().unwrap().to_string())
            .unwrap_or_else(|| panic!("no {action}"))
    };
    assert!(
        cmd("flash")
            .contains("xbflash2 program --spi --image /var/tmp/latency/bitstreams/forward.mcs -d 3b:00.0 --bar 2")
    );
    assert!(cmd("pcie_remove").contains("echo 1 > /sys/bus/pci/devices/$d/remove"));
    // LatencyLab's flash.py passes `3` after `--bar 2`; campaign163.sh checks the netdevs after
    // the onic bind, and kills any leftover receiver and its hugepage files before a start.
    assert!(cmd("flash").ends_with("--bar 2 3"), "{}", cmd("flash"));
    // Each program's own compiled table driver, run from its folder (campaign163.sh:
    // `cd $TDIR/drivers/install && ./driver`); the null image has no tables.
    assert_eq!(cmd("table_load"), "cd /users/Pavani/au280_forward/drivers/install && ./driver");
    let null = v["sessions"].as_array().unwrap().iter().find(|s| s["kind"] == "null").unwrap();
    assert!(!null["steps"].as_array().unwrap().iter().any(|s| s["action"] == "table_load"));
    let five_tuple = v["sessions"].as_array().unwrap().iter().find(|s| s["program"] == "five_tuple").unwrap();
    assert!(
        five_tuple["steps"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["command"] == "cd /users/Pavani/au280_fiveTuple/drivers/install && ./driver")
    );
    assert!(
        cmd("pcie_rescan").contains("ip link show \"$i\" > /dev/null || { echo \"$i missing after the onic bind\"")
    );
    assert!(cmd("pcie_rescan").contains("for i in enp59s0f0 enp59s0f1; do ip link show"));
    assert!(
        cmd("agent_start").starts_with(
            "if [ -f /var/tmp/latency/agent.pid ]; then kill -KILL \"$(cat /var/tmp/latency/agent.pid)\" 2> /dev/null; \
             rm -f /var/tmp/latency/agent.pid; fi; rm -f /dev/hugepages/rtemap_*; mkdir -p"
        ),
        "{}",
        cmd("agent_start")
    );
    assert!(cmd("driver_reload").ends_with("do ip link set \"$i\" up || exit 1; done && sleep 2"));
    assert_eq!(cmd("reset_method_clear"), "echo '' > /sys/bus/pci/devices/0000:3b:00.0/reset_method");
    assert!(cmd("driver_bind").ends_with("-b vfio-pci 0000:3b:00.0 0000:3b:00.1"));
    assert_eq!(
        cmd("readback"),
        "/var/tmp/latency/bin/latency-agent regs identity --bar /sys/bus/pci/devices/0000:3b:00.0/resource2"
    );
    // LatencyLab's receiver settings: rings of 512 descriptors, reflections re-addressed to the
    // sender's ConnectX-5 (`--dst-mac b8:83:03:7a:e0:b8` in campaign163.sh), and EAL arguments
    // built from the inventory's cores, memory channels (`-n 4`), PCI functions and drivers.
    assert!(
        cmd("agent_start").contains(
            "--control /var/tmp/latency/runs/forward_s1/ctl --pidfile /var/tmp/latency/agent.pid \
             --rx-ring 512 --tx-ring 512 --reflect-port 2 --reflect-dst-mac b8:83:03:7a:e0:b8 \
             -- -l 2,4,6 --main-lcore 2 -n 4 \
             --file-prefix=latency-agent --no-shconf -a 0000:3b:00.0 -a 0000:3b:00.1 -a 0000:86:00.0 \
             -d librte_net_qdma.so -d librte_common_mlx5.so -d librte_net_mlx5.so"
        ),
        "{}",
        cmd("agent_start")
    );
    let replay =
        first["runs"][0]["steps"].as_array().unwrap().iter().find(|s| s["action"] == "replay").unwrap()["command"]
            .as_str()
            .unwrap();
    assert_eq!(
        replay,
        "taskset -c 2 tcpreplay -q -T nano -i enp134s0np0 --pps=500 /var/tmp/latency/traces/forward_20k.pcap"
    );
}

#[test]
fn plan_on_sim_has_no_commands_and_the_same_replay_time() {
    let v = paper_plan_json(Some("sim"));
    assert_eq!(v["sessions"].as_array().unwrap().len(), 40);
    assert_eq!(v["predicted_seconds"]["replay"].as_f64(), Some(16_000.0));
    assert!(v["sessions"][0]["steps"][0]["command"].is_null());
    assert_eq!(v["sessions"][0]["steps"][0]["host"], "sim");
}

#[test]
fn help_documents_exit_codes() {
    let o = orchestrate(&["--help"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("2    invalid input"), "{out}");
    assert!(Path::new(env!("CARGO_BIN_EXE_orchestrate")).exists());
}

#[test]
fn reflect_plan_renders_the_oct_capture_and_reflect_commands() {
    let o =
        orchestrate(&["plan", "../plans/emulated-reflect.yaml", "--testbed", "../testbeds/oct-u280.yaml", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let first = &v["sessions"][0];
    let agent_start = first["steps"].as_array().unwrap().iter().find(|s| s["action"] == "agent_start").unwrap();
    assert!(
        agent_start["command"].as_str().unwrap().contains(
            "--pidfile /var/tmp/latency/agent.pid --rx-ring 512 --tx-ring 512 --reflect-port 2 \
                       --reflect-dst-mac b8:83:03:7a:e0:b8 -- -l 2,4,6"
        ),
        "{agent_start}"
    );
    let steps: Vec<(&str, &str)> = first["runs"][0]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["action"].as_str().unwrap(), s["command"].as_str().unwrap()))
        .collect();
    let actions: Vec<&str> = steps.iter().map(|s| s.0).collect();
    assert_eq!(actions, ["capture_start", "replay", "capture_stop"]);
    assert!(
        steps[0].1.contains(
            "setsid tcpdump -i enp134s0np0 -j adapter_unsynced -Q in --time-stamp-precision=nano --immediate-mode \
             -s 512 -B 16384 -w /var/tmp/latency/captures/forward_s1-run01.pcap"
        ),
        "{}",
        steps[0].1
    );
    assert!(steps[0].1.contains("time stamp is not supported"), "no host-clock fallback: {}", steps[0].1);
    assert!(steps[2].1.starts_with("p=$(cat /var/tmp/latency/capture.pid) && kill -INT \"$p\""), "{}", steps[2].1);
}

#[test]
fn jtag_images_are_loaded_with_vivado_and_need_no_boot() {
    let dir = std::env::temp_dir().join(format!("orchestrate-jtag-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let manifest = |name: &str, programming: &str, null: bool| {
        format!(
            "name: {name}\nfile: bin/{name}.bit\nsha256: {}\nboard: au280\nshell: open-nic\nclock_mhz: 250\n{}programming: {programming}\n",
            "ab".repeat(32),
            if null { "null: true\n" } else { "vendor_bound_cycles: 55\n" }
        )
    };
    std::fs::write(dir.join("fwd.yaml"), manifest("fwd", "jtag", false)).unwrap();
    std::fs::write(dir.join("golden.yaml"), manifest("golden", "qspi", true)).unwrap();
    std::fs::write(
        dir.join("plan.yaml"),
        "study: jtag\ntestbed: sim\nprotocol: { sessions: 1, runs: 1, pacing_pps: 500, idle_gap_s: 1, seed: 1 }\n\
         traces:\n  t: { generate: { template: forward, count: 10 } }\n\
         programs:\n  - { name: fwd, bitstream: fwd.yaml, trace: t, null: golden.yaml }\n",
    )
    .unwrap();
    // The OCT inventory with the receiver's work folder here and a stand-in for Vivado that
    // records its arguments.
    let work = dir.join("work");
    let vivado = dir.join("vivado");
    std::fs::write(&vivado, "#!/bin/sh\nprintf '%s\\n' \"$@\" > \"$(dirname \"$0\")/vivado.args\"\n").unwrap();
    Command::new("chmod").arg("+x").arg(&vivado).status().unwrap();
    let inv = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../testbeds/oct-u280.yaml"))
        .unwrap()
        .replace("/var/tmp/latency", work.to_str().unwrap())
        .replace("receiver:\n", &format!("receiver:\n  vivado: {}\n  root_port: \"0000:3a:00.0\"\n", vivado.display()))
        .replace("name: oct-u280\n", "name: oct-u280\nflash_methods: [qspi-xbflash2, jtag]\n");
    std::fs::write(dir.join("inv.yaml"), inv).unwrap();

    let o = orchestrate(&[
        "plan",
        dir.join("plan.yaml").to_str().unwrap(),
        "--testbed",
        dir.join("inv.yaml").to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let actions = |s: &serde_json::Value| -> Vec<String> {
        s["steps"].as_array().unwrap().iter().map(|s| s["action"].as_str().unwrap().to_string()).collect()
    };
    let (fwd, null) = (&v["sessions"][0], &v["sessions"][1]);
    assert!(actions(fwd)[0] == "flash_jtag" && !actions(fwd).iter().any(|a| a == "flash" || a == "boot"));
    assert!(actions(null)[..2] == ["flash", "boot"] && !actions(null).iter().any(|a| a == "flash_jtag"));

    // ESnet's program_card.sh order: the root port kept powered and the functions removed, the
    // load, a rescan below the root port until the functions are back.
    std::fs::create_dir_all(&work).unwrap();
    let cmd = fwd["steps"][0]["command"].as_str().unwrap();
    if have_shellcheck() {
        shellcheck("jtag: flash_jtag", cmd);
    }
    let load_at = cmd.find("printf '%s\\n'").unwrap();
    let rescan_at = cmd.find(" && echo 1 > /sys/bus/pci/devices/0000:3a:00.0/rescan").unwrap();
    assert!(
        cmd[..load_at].starts_with(
            "echo on > /sys/bus/pci/devices/0000:3a:00.0/power/control && for d in 0000:3b:00.0 0000:3b:00.1; do \
             if [ -e /sys/bus/pci/devices/\"$d\" ]; then echo 1 > /sys/bus/pci/devices/\"$d\"/remove; fi; done && "
        ),
        "{cmd}"
    );
    assert!(
        cmd[rescan_at..].contains("test -e /sys/bus/pci/devices/\"$d\" || { echo \"$d missing after rescan\""),
        "{cmd}"
    );
    // The load writes the hardware-manager script and hands it the image, device, server and cable.
    let run = Command::new("sh").arg("-c").arg(&cmd[load_at..rescan_at]).output().unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let tcl = work.join("program-jtag.tcl");
    assert_eq!(
        std::fs::read_to_string(&tcl).unwrap(),
        "open_hw_manager\nconnect_hw_server -url [lindex $argv 2]\n\
         current_hw_target [lindex [get_hw_targets [format {*/xilinx_tcf/Xilinx/%s} [lindex $argv 3]]] 0]\n\
         open_hw_target\nset dev [lindex [get_hw_devices [lindex $argv 1]] 0]\n\
         current_hw_device $dev\nset_property PROGRAM.FILE [lindex $argv 0] $dev\nprogram_hw_devices $dev\nclose_hw_manager\n"
    );
    let args = std::fs::read_to_string(dir.join("vivado.args")).unwrap();
    let image = work.join("bitstreams/fwd.bit");
    let want = ["-mode", "batch", "-nojournal", "-nolog", "-notrace", "-source", tcl.to_str().unwrap(), "-tclargs"]
        .into_iter()
        .chain([image.to_str().unwrap(), "xcu280_0", "localhost:3121", "*"])
        .map(|a| format!("{a}\n"))
        .collect::<String>();
    assert_eq!(args, want);

    // Each readback first reads the configured image's USERCODE through the hardware manager
    // (ESnet's check_fpga_version.sh), then the shell's registers.
    let readback = |s: &serde_json::Value| {
        let steps = s["steps"].as_array().unwrap();
        steps.iter().find(|s| s["action"] == "readback").unwrap()["command"].as_str().unwrap().to_string()
    };
    let cmd = readback(fwd);
    assert_eq!(readback(null), cmd, "whatever loaded the image");
    if have_shellcheck() {
        shellcheck("jtag: readback", &cmd);
    }
    let shell_at = cmd[..cmd.find("regs identity --bar").unwrap()].rfind(" && ").unwrap();
    let run = Command::new("sh").arg("-c").arg(&cmd[..shell_at]).output().unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let tcl = work.join("read-usercode.tcl");
    assert_eq!(
        std::fs::read_to_string(&tcl).unwrap(),
        "open_hw_manager\nconnect_hw_server -url [lindex $argv 1]\n\
         current_hw_target [lindex [get_hw_targets [format {*/xilinx_tcf/Xilinx/%s} [lindex $argv 2]]] 0]\n\
         open_hw_target\nset dev [lindex [get_hw_devices [lindex $argv 0]] 0]\n\
         puts \"\\{\\\"usercode\\\":\\\"[get_property REGISTER.USERCODE.SLR0 $dev]\\\"\\}\"\nclose_hw_manager\n"
    );
    let args = std::fs::read_to_string(dir.join("vivado.args")).unwrap();
    let want = ["-mode", "batch", "-nojournal", "-nolog", "-notrace", "-source", tcl.to_str().unwrap(), "-tclargs"]
        .into_iter()
        .chain(["xcu280_0", "localhost:3121", "*"])
        .map(|a| format!("{a}\n"))
        .collect::<String>();
    assert_eq!(args, want);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every command the built-in templates render for the OCT testbed (and those of the emulated
/// inventory) passes shellcheck as a POSIX sh script.
#[test]
fn rendered_commands_pass_shellcheck() {
    let have = Command::new("shellcheck").arg("--version").output().is_ok_and(|o| o.status.success());
    if !runs_here(have, "shellcheck (apt-get install shellcheck)") {
        return;
    }
    let mut checked = 0;
    // The emulated inventory validates once its keys and ssh_config exist (testbeds/emulated/up.sh
    // --keys; nextest's setup script of the e2e tests brings the testbed up before any test).
    let keys = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testbeds/emulated/state/ssh_config");
    for plan in ["../plans/paper.yaml", "../plans/emulated.yaml"] {
        let needs = "the emulated testbed's keys and ssh_config (testbeds/emulated/up.sh --keys)";
        if plan.contains("emulated") && !part_runs_here("plans/emulated.yaml's commands", keys.is_file(), needs) {
            continue;
        }
        let o = orchestrate(&["plan", plan, "--json"]);
        assert_eq!(o.status.code(), Some(0), "{plan}: {}", stderr(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let mut seen = std::collections::BTreeSet::new();
        let steps = v["sessions"].as_array().unwrap().iter().flat_map(|s| {
            let runs = s["runs"].as_array().unwrap().iter().flat_map(|r| r["steps"].as_array().unwrap().iter());
            s["steps"].as_array().unwrap().iter().chain(s["teardown"].as_array().unwrap()).chain(runs)
        });
        for st in steps {
            let (Some(action), Some(cmd)) = (st["action"].as_str(), st["command"].as_str()) else { continue };
            if !seen.insert(action.to_string()) {
                continue;
            }
            shellcheck(&format!("{plan}: {action}"), cmd);
            checked += 1;
        }
    }
    assert!(checked >= 14, "only {checked} commands checked");
}

/// Check `cmd` with shellcheck as a POSIX sh script (`what` names it in the failure); where
/// shellcheck is not installed, the caller's test has said so (`runs_here`). A command that writes
/// a Tcl script for Vivado quotes its `$argv` and `$dev` for Tcl, not the shell: SC2016 (an
/// expression in single quotes) is its intent there. A list variable of one element renders a
/// loop over one word (SC2043), as the inventory gives it.
fn shellcheck(what: &str, cmd: &str) {
    let tcl = if cmd.contains(".tcl && ") { ["-e", "SC2016"] } else { ["-e", "SC0000"] };
    let mut sc = Command::new("shellcheck")
        .args(["-s", "sh", "-f", "gcc", "-e", "SC2043"])
        .args(tcl)
        .arg("-")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    sc.stdin.take().unwrap().write_all(cmd.as_bytes()).unwrap();
    let out = sc.wait_with_output().unwrap();
    assert!(out.status.success(), "{what}: {cmd}\n{}", String::from_utf8_lossy(&out.stdout));
}

fn have_shellcheck() -> bool {
    let have = Command::new("shellcheck").arg("--version").output().is_ok_and(|o| o.status.success());
    part_runs_here("shellcheck of the JTAG commands", have, "shellcheck (apt-get install shellcheck)")
}

/// The dry run shows the waits the engine makes before runs: the capture's settling before the
/// first run of a session and the idle gap before the others (LatencyLab: 3 s and 10 s).
#[test]
fn the_dry_run_shows_the_settling_and_the_idle_gaps() {
    let o = orchestrate(&["plan", "../plans/paper.yaml"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    let first = text.split("session 2/").next().unwrap();
    assert_eq!(first.matches("  wait 3 s (capture settles)\n  run 1 ").count(), 1, "{first}");
    assert_eq!(first.matches("  wait 10 s (idle gap)\n").count(), 9, "{first}");
    let v = paper_plan_json(None);
    // 40 sessions × (3 s + 9 × 10 s).
    assert_eq!(v["predicted_seconds"]["idle_gaps"], 40.0 * 93.0);
}

/// The dry run names what the SSH testbed does besides the steps: leases, leftovers and uploads
/// before the first session, the agent's control traffic in every session, the cleanup after.
#[test]
fn the_dry_run_shows_leases_agent_control_and_cleanup() {
    let o = orchestrate(&["plan", "../plans/paper.yaml"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    for line in [
        "before: [sender] take the lease /var/tmp/latency/lease (refused while another orchestrator holds it; \
         taken over after 120 s without heartbeat or when its holder is dead); renewed after every step",
        "before: [receiver] take the lease /var/tmp/latency/lease (",
        "before: [receiver] stop an agent left running (/var/tmp/latency/agent.pid); [sender] stop a capture \
         left running (/var/tmp/latency/capture.pid)",
        "  [receiver] agent control: `begin R` and `end R` written to /var/tmp/latency/runs/forward_s1/ctl; \
         the agent's answers read from /var/tmp/latency/runs/forward_s1/events.jsonl",
        "after: [sender] [receiver] release the leases",
    ] {
        assert!(text.contains(line), "missing {line:?}");
    }
    let sim = orchestrate(&["plan", "../plans/paper.yaml", "--testbed", "sim"]);
    let sim = String::from_utf8_lossy(&sim.stdout);
    assert!(!sim.contains("before:") && !sim.contains("agent control"), "the simulator has none of these");
}

/// A first argument that is neither a command nor a file, but close to a command's name, is a
/// mistyped command: the usage status and the command meant, not a plan file that is not found.
#[test]
fn a_mistyped_command_is_suggested_not_read_as_a_plan() {
    let typos = [
        ("anlyze", "analyze"),
        ("reprot", "report"),
        ("valdate", "validate"),
        ("histroy", "history"),
        ("plna", "plan"),
    ];
    for (typed, meant) in typos {
        let o = orchestrate(&[typed, "some/dir"]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        let err = stderr(&o);
        assert!(err.starts_with(&format!("error: unknown command `{typed}`; did you mean `{meant}`?\n")), "{err}");
        assert!(!err.contains("file not found"), "{err}");
    }
    // A file of that name is a plan (`orchestrate PLAN`), however close its name is to a command.
    let dir = crate::common::tmp_dir("mistyped");
    std::fs::write(dir.join("anlyze"), "study: [\n").unwrap();
    let o = crate::common::bin().current_dir(&dir).args(["anlyze"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).starts_with("anlyze:2:1: YAML syntax error"), "{}", stderr(&o));
    // A name close to no command is still read as a plan.
    let o = orchestrate(&["no-such-plan.yaml"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).starts_with("no-such-plan.yaml:1:1: cannot read: "), "{}", stderr(&o));
    std::fs::remove_dir_all(dir).unwrap();
}

/// Results folders and plans are named in the journal and provenance.json (UTF-8 text): a path
/// that is not UTF-8 is refused by name before anything is created, never a panic.
#[test]
fn non_utf8_paths_are_refused_before_anything_is_created() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let dir = crate::common::tmp_dir("non-utf8");
    let check = |o: std::process::Output, what: &str| {
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains(what) && err.contains("is not valid UTF-8"), "{err}");
        assert!(!err.contains("panicked"), "{err}");
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, [OsStr::from_bytes(b"plans\xff")], "nothing created");
    };
    let plans = dir.join(OsStr::from_bytes(b"plans\xff"));
    std::fs::create_dir(&plans).unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let text = std::fs::read_to_string(root.join("plans/smoke.yaml"))
        .unwrap()
        .replace("../bitstreams", root.join("bitstreams").to_str().unwrap());
    std::fs::write(plans.join("smoke.yaml"), text).unwrap();

    let out = dir.join(OsStr::from_bytes(b"out\xff"));
    let smoke = root.join("plans/smoke.yaml");
    check(
        crate::common::bin().current_dir(&dir).arg("run").arg(&smoke).arg("--out").arg(&out).output().unwrap(),
        "--out",
    );
    // The plan in a folder whose name is not UTF-8: with `run`, alone, and with `nightly`.
    let plan = plans.join("smoke.yaml");
    check(crate::common::bin().current_dir(&dir).arg("run").arg(&plan).output().unwrap(), "<PLAN>");
    check(crate::common::bin().current_dir(&dir).arg(&plan).output().unwrap(), "<PLAN>");
    check(
        crate::common::bin().current_dir(&dir).arg("nightly").arg(&plan).args(["--store", "store"]).output().unwrap(),
        "<PLAN>",
    );
    std::fs::remove_dir_all(dir).unwrap();
}

/// Two runs of one plan started in the same second without `--out` each get a folder of their
/// own: a taken default name gets a suffix, the folder created atomically.
#[test]
fn runs_started_in_the_same_second_get_their_own_default_folders() {
    let cwd = crate::common::tmp_dir("default-out");
    let plan = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/good/pcap-trace.yaml");
    let hash = latency_plan::load(&plan, None).unwrap().0.hash;
    let study = cwd.join("results/pcap-trace");
    // Every default name of the next ten seconds is taken (by a folder of something else).
    let now = latency_results::now_secs();
    let taken: Vec<_> = (now..now + 10)
        .map(|t| study.join(format!("{}-{}", latency_results::utc(t).replace(':', ""), &hash[..12])))
        .collect();
    for t in &taken {
        std::fs::create_dir_all(t).unwrap();
        std::fs::write(t.join("other.txt"), "not a study").unwrap();
    }
    let run = || crate::common::bin().current_dir(&cwd).arg("run").arg(&plan).arg("--quiet").output().unwrap();
    let o = run();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let folder = cwd.join(String::from_utf8_lossy(&o.stdout).trim());
    assert!(folder.join("journal.jsonl").is_file() && folder.join("summary.json").is_file(), "{}", folder.display());
    assert!(folder.to_str().unwrap().ends_with("-2"), "{}", folder.display());
    assert!(taken.iter().any(|t| folder.to_str().unwrap() == format!("{}-2", t.display())), "{}", folder.display());
    for t in &taken {
        let names: Vec<_> = std::fs::read_dir(t).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["other.txt"], "{} untouched", t.display());
    }
    // Two at once: both finish, each in its own folder.
    let spawn = || {
        crate::common::bin()
            .current_dir(&cwd)
            .arg("run")
            .arg(&plan)
            .arg("--quiet")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    assert!(a.status.success() && b.status.success(), "{}\n{}", stderr(&a), stderr(&b));
    assert_ne!(a.stdout, b.stdout);
    std::fs::remove_dir_all(cwd).unwrap();
}

/// `compare` judges finished studies only: an interrupted candidate (or baseline) is refused as
/// invalid input, naming the folder, and nothing is judged.
#[test]
fn compare_refuses_a_study_that_has_not_ended() {
    let base = crate::common::tmp("compare-base");
    let o = crate::run::run(&base, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    // Stopped in its last null calibration sessions, after every program's runs.
    let cand = crate::common::tmp("compare-interrupted");
    let mut child = crate::run::spawn(&cand, &[]);
    assert!(crate::run::wait_for_lines(&mut child, &cand, 350), "finished too early");
    assert!(Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap().success());
    assert_eq!(child.wait().unwrap().code(), Some(130));
    let (b, c) = (base.to_str().unwrap(), cand.to_str().unwrap());
    for (args, role) in [([b, c], "candidate"), ([c, b], "baseline")] {
        let junit = crate::common::tmp("compare-junit.xml");
        let o = orchestrate(&["compare", args[0], args[1], "--junit", junit.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert_eq!(
            stderr(&o),
            format!(
                "error: {c}: the {role} study has not ended (interrupted or still running): finish it with `orchestrate \
                 run PLAN --out {c} --resume`, or compare a finished study\n"
            )
        );
        assert!(o.stdout.is_empty() && !junit.exists(), "nothing judged");
    }
    for d in [base, cand] {
        std::fs::remove_dir_all(d).unwrap();
    }
}

/// A plan's images must be built for the testbed's board and shell, and a one-CMAC board captures
/// one FPGA port: each refused at its line and column before any host is touched (exit 2).
#[test]
fn images_for_another_board_or_shell_and_two_fpga_ports_on_a_u50_are_refused_where_they_stand() {
    let dir = std::env::temp_dir().join(format!("orchestrate-board-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let oct = std::fs::read_to_string(root.join("testbeds/oct-u280.yaml")).unwrap();
    let plan = std::fs::read_to_string(root.join("plans/smoke.yaml"))
        .unwrap()
        .replace("../bitstreams", root.join("bitstreams").to_str().unwrap())
        .replace("../traces", root.join("traces").to_str().unwrap());
    std::fs::write(dir.join("plan.yaml"), &plan).unwrap();
    let run = |inventory: &str| {
        std::fs::write(dir.join("inv.yaml"), inventory).unwrap();
        let o = orchestrate(&[
            "plan",
            dir.join("plan.yaml").to_str().unwrap(),
            "--testbed",
            dir.join("inv.yaml").to_str().unwrap(),
        ]);
        (o.status.code(), stderr(&o))
    };
    // A U250 testbed: every image of the plan (built for the U280) is refused at its `board`.
    let (code, err) = run(&oct.replace("name: oct-u280\n", "name: oct-u250\nboard: u250\n"));
    assert_eq!(code, Some(2), "{err}");
    let forward = root.join("bitstreams/forward.yaml");
    let want = format!(
        "{}:7:8: bitstream `forward` is built for a U280, but testbed `oct-u250` has a U250 ({}:13:8): an image is \
         never written to another board",
        forward.display(),
        dir.join("inv.yaml").display()
    );
    assert!(err.contains(&want), "{err}");
    // An ESnet testbed cannot boot what xbflash2 writes without a power cycle.
    let esnet = oct.replace("name: oct-u280\n", "name: esnet\nshell: esnet-smartnic\n");
    let (code, err) = run(&esnet);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("inv.yaml:1:1: the esnet-smartnic shell boots an image written over PCIe (`qspi-xbflash2`) only after a power cycle"), "{err}");
    // Written over JTAG, the Open-NIC images are refused at each manifest's `shell`.
    let esnet = esnet
        .replace("shell: esnet-smartnic\n", "shell: esnet-smartnic\nflash_methods: [jtag-flash]\n")
        .replace("receiver:\n", "receiver:\n  root_port: \"3a:00.0\"\n");
    let (code, err) = run(&esnet);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "{}:8:8: bitstream `forward` is built on the open-nic shell, but testbed `esnet` brings up esnet-smartnic images",
            forward.display()
        )),
        "{err}"
    );
    // A U50 has one CMAC: two FPGA interfaces are refused in the inventory itself.
    let u50 = oct.replace("name: oct-u280\n", "name: u50\nboard: u50\n");
    let (code, err) = run(&u50);
    assert_eq!(code, Some(2), "{err}");
    let line = u50.lines().position(|l| l.trim_start().starts_with("fpga_ifaces:")).unwrap() + 1;
    assert!(
        err.contains(&format!(
            "inv.yaml:{line}:16: `fpga_ifaces` lists 2 interfaces but a U50 has one CMAC, so one FPGA port (the \
             pipeline's): capture the bypass copy on a NIC port with `bypass_iface`"
        )),
        "{err}"
    );
    // One FPGA interface and no bypass port: the plan's two capture ports cannot be had.
    let one = u50.replace("fpga_ifaces: [enp59s0f0, enp59s0f1]", "fpga_ifaces: [enp59s0f0]");
    let (code, err) = run(&one);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("plan captures 2 ports but a U50 has one CMAC"), "{err}");
    // With a NIC port for the bypass copy it runs, and its health check reads one CMAC.
    let mut u50_manifests = plan.clone();
    for m in ["forward", "checksum", "golden_nic"] {
        let text = std::fs::read_to_string(root.join(format!("bitstreams/{m}.yaml"))).unwrap();
        std::fs::write(dir.join(format!("{m}.yaml")), text.replace("board: au280", "board: au50")).unwrap();
        u50_manifests = u50_manifests.replace(
            &root.join(format!("bitstreams/{m}.yaml")).display().to_string(),
            &dir.join(format!("{m}.yaml")).display().to_string(),
        );
    }
    std::fs::write(dir.join("plan.yaml"), &u50_manifests).unwrap();
    let with_bypass = one.replace("fpga_ifaces: [enp59s0f0]", "fpga_ifaces: [enp59s0f0]\n  bypass_iface: enp134s0f1");
    let (code, err) = run(&with_bypass);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("a NIC port, which the dpdk backend cannot"), "{err}");
    let with_bypass = with_bypass.replace("receiver:\n", "receiver:\n  backend: af-packet\n");
    std::fs::write(dir.join("inv.yaml"), &with_bypass).unwrap();
    let o = orchestrate(&[
        "plan",
        dir.join("plan.yaml").to_str().unwrap(),
        "--testbed",
        dir.join("inv.yaml").to_str().unwrap(),
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(out.contains("regs check --bar /sys/bus/pci/devices/0000:3b:00.0/resource2 --cmacs 1"), "{out}");
    assert!(out.contains("--ports enp59s0f0,enp134s0f1"), "{out}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `flash_methods: [jtag-flash]`: QSPI images written over JTAG (ESnet's program_flash.tcl) with
/// the board's QSPI part, booted with `boot_hw_device`, priced as a JTAG write; an image the
/// testbed's methods cannot program, and a JTAG method without the root port, refused.
#[test]
fn qspi_images_are_written_over_jtag_where_the_testbed_says_so() {
    let dir = std::env::temp_dir().join(format!("orchestrate-jtag-flash-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let plan = std::fs::read_to_string(root.join("plans/smoke.yaml"))
        .unwrap()
        .replace("../bitstreams", root.join("bitstreams").to_str().unwrap())
        .replace("../traces", root.join("traces").to_str().unwrap());
    std::fs::write(dir.join("plan.yaml"), &plan).unwrap();
    let work = dir.join("work");
    let oct = std::fs::read_to_string(root.join("testbeds/oct-u280.yaml"))
        .unwrap()
        .replace("/var/tmp/latency", work.to_str().unwrap());
    let plan_with = |inventory: &str, json: bool| {
        std::fs::write(dir.join("inv.yaml"), inventory).unwrap();
        let (p, i) = (dir.join("plan.yaml"), dir.join("inv.yaml"));
        let mut args = vec!["plan", p.to_str().unwrap(), "--testbed", i.to_str().unwrap()];
        if json {
            args.push("--json");
        }
        let o = orchestrate(&args);
        (o.status.code(), String::from_utf8_lossy(&o.stdout).into_owned(), stderr(&o))
    };
    // (The OCT's own estimates are those of its xbflash2 writes.)
    let jtag_flash = oct
        .replace("  flash: 420\n  boot: 30\n", "")
        .replace("name: oct-u280\n", "name: oct-jtag\nflash_methods: [jtag-flash]\n")
        .replace("receiver:\n", "receiver:\n  root_port: \"3a:00.0\"\n  jtag_target: 21760204S029A\n");
    let (code, out, err) = plan_with(&jtag_flash, true);
    assert_eq!(code, Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let step = |action: &str| {
        v["sessions"][0]["steps"].as_array().unwrap().iter().find(|s| s["action"] == action).cloned().unwrap()
    };
    let (flash, boot) = (step("flash"), step("boot"));
    assert_eq!((flash["estimate_s"].as_f64(), boot["estimate_s"].as_f64()), (Some(1200.0), Some(40.0)));
    let cmd = flash["command"].as_str().unwrap();
    assert!(
        cmd.ends_with(&format!(
            "-tclargs {}/bitstreams/forward.mcs xcu280_0 localhost:3121 21760204S029A mt25qu01g-spi-x1_x2_x4",
            work.display()
        )),
        "{cmd}"
    );
    // The script it writes: the configuration memory written and verified, as program_flash.tcl.
    std::fs::create_dir_all(&work).unwrap();
    let load_at = cmd.find("printf '%s\\n'").unwrap();
    let write_at = load_at + cmd[load_at..].find("program-flash.tcl && ").unwrap() + "program-flash.tcl".len();
    let o = Command::new("sh").arg("-c").arg(&cmd[load_at..write_at]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let tcl = std::fs::read_to_string(work.join("program-flash.tcl")).unwrap();
    for line in [
        "create_hw_cfgmem -hw_device $dev [lindex [get_cfgmem_parts [lindex $argv 4]] 0]",
        "set_property PROGRAM.FILES [list [lindex $argv 0]] $mem",
        "set_property PROGRAM.VERIFY 1 $mem",
        "program_hw_cfgmem -hw_cfgmem $mem",
    ] {
        assert!(tcl.lines().any(|l| l == line), "{line} in {tcl}");
    }
    if have_shellcheck() {
        shellcheck("jtag-flash: flash", cmd);
        shellcheck("jtag-flash: boot", boot["command"].as_str().unwrap());
    }
    assert!(boot["command"].as_str().unwrap().contains("'boot_hw_device $dev'"), "{boot}");
    assert!(boot["command"].as_str().unwrap().contains("echo 1 > /sys/bus/pci/devices/0000:3a:00.0/rescan"), "{boot}");

    // A testbed that only loads over JTAG cannot write the plan's QSPI images.
    let jtag_only = jtag_flash.replace("flash_methods: [jtag-flash]", "flash_methods: [jtag]");
    let (code, _, err) = plan_with(&jtag_only, false);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "{}:12:14: bitstream `forward` is programmed over qspi, which needs the flash method `qspi-xbflash2` or \
             `jtag-flash`; testbed `oct-jtag` has jtag ({}:13:16)",
            root.join("bitstreams/forward.yaml").display(),
            dir.join("inv.yaml").display()
        )),
        "{err}"
    );
    // A JTAG method keeps the root port powered: the inventory must name it.
    let (code, _, err) = plan_with(&jtag_flash.replace("  root_port: \"3a:00.0\"\n", ""), false);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("inv.yaml:13:16: `jtag-flash` needs `receiver.root_port`"), "{err}");
    // xbflash2's procedure takes config-fpga's key; the Open-NIC shell's driver reload, onic.ko.
    let key = "  config_fpga_key: /var/tmp/latency/keys/private_key.pem\n"
        .replace("/var/tmp/latency", work.to_str().unwrap());
    assert!(oct.contains(&key));
    let (code, _, err) = plan_with(&oct.replace(&key, ""), false);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(
            "inv.yaml:1:1: `qspi-xbflash2` needs `receiver.config_fpga_key`, config-fpga's key, for its `flash` command"
        ),
        "{err}"
    );
    let onic = oct.lines().find(|l| l.trim_start().starts_with("onic_module:")).unwrap().to_string() + "\n";
    let (code, _, err) = plan_with(&oct.replace(&onic, ""), false);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(
            "inv.yaml:22:3: the open-nic shell's `driver_reload` command needs `receiver.onic_module`, the Open-NIC driver"
        ),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `plans/int.yaml` names one build per board and shell; on each shipped inventory its dry run
/// takes that testbed's builds and shows its shell's and flash method's commands (every one
/// passing shellcheck), and refuses the images not built yet only where `run` would flash them.
#[test]
fn the_int_plan_runs_dry_on_every_shipped_inventory_with_its_shells_and_methods_commands() {
    let check = have_shellcheck();
    for (inventory, dir, expect) in [
        (
            "oct-u280",
            "",
            &["xbflash2 program --spi --image", "config-fpga boot", "regs check --bar", "--cmacs 2", "regs identity"][..],
        ),
        (
            "esnet-u280",
            "esnet-u280",
            &[
                "'program_hw_devices $dev'",
                "sn-cfg configure port --state enable",
                "sn-p4 apply p4bm",
                "sn-cfg show port status",
                "sn-cfg show device info",
            ],
        ),
        ("u250-opennic", "opennic-u250", &["xbflash2 program --spi --image", "config-fpga boot", "--cmacs 2"]),
        (
            "u55c-esnet",
            "esnet-u55c",
            &["connect_hw_server -url", "sn-cfg configure switch -i 0:physical:app -i 1:physical:bypass"],
        ),
        ("u50-opennic", "opennic-u50", &["--cmacs 1", "--backend af-xdp --ports enp59s0f0,enp175s0f1"]),
    ] {
        let inv = format!("../testbeds/{inventory}.yaml");
        let o = orchestrate(&["plan", "../plans/int.yaml", "--testbed", &inv, "--json"]);
        assert_eq!(o.status.code(), Some(0), "{inventory}: {}", stderr(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let commands: Vec<&str> = v["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|s| {
                s["steps"].as_array().unwrap().iter().chain(s["write_first"].as_array().into_iter().flatten())
            })
            .filter_map(|st| st["command"].as_str())
            .collect();
        for want in expect {
            assert!(commands.iter().any(|c| c.contains(want)), "{inventory}: no `{want}` in {commands:#?}");
        }
        // Its own builds: the not-built ones are refused from their own folder.
        let refused: Vec<&str> = v["refused"].as_array().unwrap().iter().filter_map(|r| r.as_str()).collect();
        let folder =
            if dir.is_empty() { "bitstreams/int_transit.yaml".to_string() } else { format!("bitstreams/{dir}/") };
        assert!(!refused.is_empty() && refused.iter().all(|r| r.contains(&folder)), "{inventory}: {refused:?}");
        if check {
            let mut seen = std::collections::BTreeSet::new();
            for c in commands.iter().filter(|c| seen.insert(**c)) {
                shellcheck(inventory, c);
            }
        }
    }
}

/// A program names one build per board and shell: two for the same pair are refused where the
/// second stands.
#[test]
fn two_builds_for_the_same_board_and_shell_are_refused() {
    let dir = std::env::temp_dir().join(format!("orchestrate-builds-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let text = std::fs::read_to_string(root.join("plans/int.yaml")).unwrap();
    // The ESnet U280 build of Forward replaced by a second Open-NIC U280 one.
    let esnet = "      - ../bitstreams/esnet-u280/forward.yaml\n";
    let second = text[..text.find(esnet).unwrap()].lines().count() + 1;
    let plan =
        text.replace(esnet, "      - ../bitstreams/five_tuple.yaml\n").replace("../", &format!("{}/", root.display()));
    std::fs::write(dir.join("plan.yaml"), &plan).unwrap();
    let o = orchestrate(&["validate", dir.join("plan.yaml").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!(
            "plan.yaml:{second}:9: {}/bitstreams/five_tuple.yaml is a second build for a U280 with the open-nic shell ({}/bitstreams/forward.yaml is the first)",
            root.display(),
            root.display()
        )),
        "{}",
        stderr(&o)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
