//! Where the study's files live on the testbed's hosts. Every remote path the orchestrator reads,
//! writes or hands to a host (work folders, lease, pidfiles, the agent's control pipe and events,
//! session and run files, captures, uploaded traces, tables, images and the agent binary) is a
//! method of [`RemoteLayout`], so that each remote file name is spelled once.
//!
//! Paths are plain strings: they name files on another machine and are shell-quoted where they
//! reach a remote shell.

use super::inventory::{Inventory, Role};

/// Seconds without a heartbeat after which a host's lease is stale and may be taken over.
pub const LEASE_STALE_S: u64 = 120;

/// The files of a study on the sender and the receiver, below each host's work folder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteLayout {
    sender: String,
    receiver: String,
}

impl RemoteLayout {
    /// The layout below the given work folders.
    pub fn new(sender_workdir: &str, receiver_workdir: &str) -> RemoteLayout {
        RemoteLayout { sender: sender_workdir.to_string(), receiver: receiver_workdir.to_string() }
    }

    /// The layout below the work folders of `inv`'s hosts.
    pub fn of(inv: &Inventory) -> RemoteLayout {
        RemoteLayout::new(&inv.sender.host.workdir, &inv.receiver.host.workdir)
    }

    /// The work folder of `role`'s host.
    pub fn workdir(&self, role: Role) -> &str {
        match role {
            Role::Sender => &self.sender,
            Role::Receiver => &self.receiver,
        }
    }

    fn file(&self, role: Role, rel: &str) -> String {
        format!("{}/{rel}", self.workdir(role))
    }

    /// The lease of `role`'s host: the holder's name; its mtime is the holder's heartbeat.
    pub fn lease(&self, role: Role) -> String {
        self.file(role, "lease")
    }

    /// Pidfile of the receiver's agent.
    pub fn agent_pidfile(&self) -> String {
        self.file(Role::Receiver, "agent.pid")
    }

    /// Pidfile of the sender's capture (reflect mode).
    pub fn capture_pidfile(&self) -> String {
        self.file(Role::Sender, "capture.pid")
    }

    /// Pidfiles of what a study leaves running, with their hosts: the agent, the capture.
    pub fn pidfiles(&self) -> [(Role, String); 2] {
        [(Role::Receiver, self.agent_pidfile()), (Role::Sender, self.capture_pidfile())]
    }

    /// Folder of a session on the receiver: the agent's run files, its events and control pipe.
    pub fn session_dir(&self, session: &str) -> String {
        self.file(Role::Receiver, &format!("runs/{session}"))
    }

    /// The control pipe of the session's agent (one command per line).
    pub fn control_pipe(&self, session: &str) -> String {
        format!("{}/ctl", self.session_dir(session))
    }

    /// The events of the session's agent (one JSON object per line).
    pub fn events(&self, session: &str) -> String {
        format!("{}/events.jsonl", self.session_dir(session))
    }

    /// The standard error of the session's agent.
    pub fn agent_log(&self, session: &str) -> String {
        format!("{}/agent.log", self.session_dir(session))
    }

    /// The name a run file (as the agent reported it) takes once collected by attempt `attempt`.
    pub fn collected(run_file: &str, attempt: u32) -> String {
        format!("{run_file}.collected-{attempt}")
    }

    /// The sender's capture of one run's reflected probes (reflect mode).
    pub fn capture_file(&self, session: &str, run: u32) -> String {
        self.file(Role::Sender, &format!("captures/{session}-run{run:02}.pcap"))
    }

    /// The records of run `run` of `session` as the sender's originator writes them.
    pub fn originate_file(&self, session: &str, run: u32) -> String {
        self.file(Role::Sender, &format!("captures/{session}-run{run:02}.arrows"))
    }

    /// A trace on the sender, by file name.
    pub fn trace(&self, file_name: &str) -> String {
        self.file(Role::Sender, &format!("traces/{file_name}"))
    }

    /// A program's table file on the receiver, by program and file name.
    pub fn table(&self, program: &str, file_name: &str) -> String {
        self.file(Role::Receiver, &format!("tables/{program}/{file_name}"))
    }

    /// A bitstream image on the receiver, by file name.
    pub fn bitstream(&self, file_name: &str) -> String {
        self.file(Role::Receiver, &format!("bitstreams/{file_name}"))
    }

    /// Whether the agent binary at `agent` (the inventory's path) is in the receiver's work
    /// folder, e.g. `<workdir>/bin/latency-agent`: the orchestrator then uploads its own build.
    pub fn agent_is_staged(&self, role: Role, agent: &str) -> bool {
        agent.starts_with(&format!("{}/", self.workdir(role)))
    }

    /// Where an upload to `remote` is written until its checksum is verified.
    pub fn partial(remote: &str) -> String {
        format!("{remote}.part")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inventory::StepContext;
    use crate::template::TemplateValue;

    fn layout() -> RemoteLayout {
        RemoteLayout::new("/s", "/r w")
    }

    #[test]
    fn every_path_is_below_its_hosts_workdir() {
        let l = layout();
        assert_eq!((l.workdir(Role::Sender), l.workdir(Role::Receiver)), ("/s", "/r w"));
        assert_eq!((l.lease(Role::Sender), l.lease(Role::Receiver)), ("/s/lease".into(), "/r w/lease".into()));
        assert_eq!(l.pidfiles(), [(Role::Receiver, "/r w/agent.pid".into()), (Role::Sender, "/s/capture.pid".into())]);
        assert_eq!(l.session_dir("forward_s1"), "/r w/runs/forward_s1");
        assert_eq!(l.control_pipe("forward_s1"), "/r w/runs/forward_s1/ctl");
        assert_eq!(l.events("forward_s1"), "/r w/runs/forward_s1/events.jsonl");
        assert_eq!(l.agent_log("forward_s1"), "/r w/runs/forward_s1/agent.log");
        assert_eq!(RemoteLayout::collected("/r w/runs/x/run01.arrows", 2), "/r w/runs/x/run01.arrows.collected-2");
        assert_eq!(l.capture_file("forward_s1", 3), "/s/captures/forward_s1-run03.pcap");
        assert_eq!(l.trace("forward_500.pcap"), "/s/traces/forward_500.pcap");
        assert_eq!(l.table("forward", "t.txt"), "/r w/tables/forward/t.txt");
        assert_eq!(l.bitstream("forward.mcs"), "/r w/bitstreams/forward.mcs");
        assert_eq!(RemoteLayout::partial("/s/traces/a.pcap"), "/s/traces/a.pcap.part");
        assert!(l.agent_is_staged(Role::Receiver, "/r w/bin/latency-agent"));
        assert!(!l.agent_is_staged(Role::Receiver, "/r wx/bin/latency-agent"));
        assert!(!l.agent_is_staged(Role::Receiver, "latency-agent"));
        assert!(l.agent_is_staged(Role::Sender, "/s/bin/latency-agent") && !l.agent_is_staged(Role::Sender, "/r w/a"));
    }

    /// The step templates get their paths from the inventory's variables; they must name the
    /// files the testbed itself reads and writes.
    #[test]
    fn the_template_variables_name_the_same_files() {
        let path = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../testbeds/oct-u280.yaml"));
        let mut diags = Vec::new();
        let mut inv = crate::load_file(path, &mut diags, crate::inventory::decode).unwrap();
        inv.sender.host.workdir = "/var/tmp/s".into();
        inv.receiver.host.workdir = "/var/tmp/r".into();
        let l = RemoteLayout::of(&inv);
        let ctx = StepContext {
            program: "forward",
            session: 1,
            session_name: "forward_s1",
            run: Some(2),
            bitstream_file: "forward.mcs",
            bitstream_sha256: "00",
            table: Some("forward/t.txt"),
            table_driver_dir: None,
            trace_file: "forward_500.pcap",
            pacing_pps: 2000,
            timing: crate::Timing::Pps,
            overrides: &[],
            burst: 1,
            probe_format: "latencylab",
            reflect: true,
            soak: None,
            ports: 2,
        };
        let vars = inv.vars(&ctx);
        let word = |name: &str| match vars.get(name) {
            Some(TemplateValue::Word(w)) => w.clone(),
            other => panic!("{name}: {other:?}"),
        };
        // The template variables are the layout's paths, spelled out here by hand.
        for (name, path) in [
            ("agent_pidfile", "/var/tmp/r/agent.pid"),
            ("capture_pidfile", "/var/tmp/s/capture.pid"),
            ("session_dir", "/var/tmp/r/runs/forward_s1"),
            ("capture_file", "/var/tmp/s/captures/forward_s1-run02.pcap"),
            ("originate_file", "/var/tmp/s/captures/forward_s1-run02.arrows"),
            ("capture_ports", "enp59s0f0,enp59s0f1"),
            ("trace", "/var/tmp/s/traces/forward_500.pcap"),
            ("bitstream", "/var/tmp/r/bitstreams/forward.mcs"),
            ("workdir", "/var/tmp/r"),
        ] {
            assert_eq!(word(name), path, "{name}");
        }
        assert!(matches!(vars.get("table"), Some(TemplateValue::List(t)) if t == &["/var/tmp/r/tables/forward/t.txt"]));
        assert_eq!(l.control_pipe("forward_s1"), "/var/tmp/r/runs/forward_s1/ctl");
        // The EAL's arguments only for the DPDK backend, the inventory's or the level's.
        let eal = |inv: &Inventory, ctx: &StepContext<'_>| match inv.vars(ctx).get("eal_args") {
            Some(TemplateValue::List(a)) => a.len(),
            other => panic!("eal_args: {other:?}"),
        };
        assert!(!inv.receiver.eal_args.is_empty() && eal(&inv, &ctx) == inv.receiver.eal_args.len());
        inv.receiver.backend = "af-packet".into();
        assert_eq!(eal(&inv, &ctx), 0);
        let dpdk = [("agent_backend", "dpdk")];
        assert_eq!(eal(&inv, &StepContext { overrides: &dpdk, ..ctx }), inv.receiver.eal_args.len());
        assert_eq!(l.events("forward_s1"), "/var/tmp/r/runs/forward_s1/events.jsonl");
    }
}
