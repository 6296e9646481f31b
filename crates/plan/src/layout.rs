//! Where the study's files live on the testbed's hosts. Every remote path the orchestrator reads,
//! writes or hands to a host (work folders, lease, pidfiles, the agent's control pipe and events,
//! session and run files, captures, uploaded traces, tables, images and the agent binary) is a
//! method of [`RemoteLayout`], so that each remote file name is spelled once.
//!
//! Paths are plain strings: they name files on another machine and are shell-quoted where they
//! reach a remote shell.

use crate::actions::Role;

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
}
