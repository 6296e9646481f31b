//! Expansion of a plan into the ordered schedule of sessions, steps and runs that the engine walks
//! and that `orchestrate plan` shows.
//!
//! Order: each program's sessions in plan order, then the null sessions of each trace (in order of
//! first use), so that with `flash: on_change` or `redraw` the null image is written once (and a
//! program's sessions and its null calibration's run hours apart: drift between them is not
//! cancelled by the order). With factors, a
//! session's runs go through the levels (`order: session_level_run`) or each level has its own
//! sessions (`level_session_run`); runs are numbered through the session, and sessions through the
//! group. A null calibration runs the levels that change the traffic (`frame_size`), every other
//! factor at its base value; without such a factor it runs once, shared by every level.

use std::path::{Path, PathBuf};

use crate::model::{Around, LevelPlan, Pps, Predicted, Run, Schedule, Session, Step};
use latency_results::SessionKind;

use latency_plan::Bitstream;
use latency_plan::FlashPolicy;
use latency_plan::Generated;
use latency_plan::Inventory;
use latency_plan::Level;
use latency_plan::Plan;
use latency_plan::ProbeFormat;
use latency_plan::Sender;
use latency_plan::Timing;
use latency_plan::Trace;
use latency_plan::TraceSource;
use latency_plan::bitstream::Programming;
use latency_plan::factors::Order;
use latency_plan::inventory::Action;
use latency_plan::inventory::Role;
use latency_plan::inventory::StepContext;
use latency_plan::yaml::{Diagnostic, Pos};
use latency_proto::pcap::{PcapError, Reader};

/// A session group before rendering: one program or one null/trace pair.
struct Group<'a> {
    kind: SessionKind,
    name: String,
    bitstream: &'a Bitstream,
    trace: usize,
    table: Option<String>,
    /// Its sessions (adaptive: the most it may take).
    sessions: u32,
}

/// Why a plan cannot be expanded into a schedule: a trace, at its place in the plan
/// (`plan.yaml:6:5: trace `t` (t.pcap): …`).
#[derive(Debug)]
pub enum ExpandError {
    /// A pcap trace cannot be read to count its probes.
    Probes {
        /// The trace.
        trace: Box<TraceAt>,
        /// Why.
        source: PcapError,
    },
    /// A trace replayed at its own timing (`timing: trace`) has none to replay.
    NoTiming {
        /// The trace.
        trace: Box<TraceAt>,
        /// What is wrong with its time stamps.
        why: NoTiming,
    },
}

impl ExpandError {
    /// The error as a diagnostic at the trace's place in the plan.
    pub fn diagnostic(&self) -> Diagnostic {
        let (trace, message) = match self {
            ExpandError::Probes { trace, source } => (trace, format!("{trace}: cannot count its probes: {source}")),
            ExpandError::NoTiming { trace, why } => (trace, format!("{trace}: {why}")),
        };
        Diagnostic { file: trace.plan.clone(), pos: trace.at, message }
    }
}

impl std::fmt::Display for ExpandError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.diagnostic().fmt(f)
    }
}

impl std::error::Error for ExpandError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ExpandError::Probes { source, .. } => Some(source),
            ExpandError::NoTiming { why, .. } => Some(why),
        }
    }
}

/// A trace of a plan and where the plan names it; shown as the trace and its file (`trace `t`
/// (t.pcap)`), the place being the diagnostic's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceAt {
    /// The plan file.
    pub plan: PathBuf,
    /// Where the trace is in the plan.
    pub at: Pos,
    /// The trace's name.
    pub name: String,
    /// Its file (none for a generated trace).
    pub path: Option<PathBuf>,
}

impl TraceAt {
    fn of(plan: &Plan, t: &Trace) -> Box<TraceAt> {
        let path = match &t.source {
            TraceSource::Pcap { path, .. } => Some(path.clone()),
            _ => None,
        };
        Box::new(TraceAt { plan: plan.path.clone(), at: t.at, name: t.name.clone(), path })
    }
}

impl std::fmt::Display for TraceAt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "trace `{}`", self.name)?;
        match &self.path {
            Some(p) => write!(f, " ({})", p.display()),
            None => Ok(()),
        }
    }
}

/// Why a trace's time stamps give no timing to replay.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NoTiming {
    /// A record is stamped before the one it follows.
    #[error(
        "record {record} is stamped {} before record {}: with `timing: trace` the time stamps pace the replay, so \
         they must not go back",
        duration(*.by_ns),
        .record - 1
    )]
    Back {
        /// The record, from 1.
        record: u64,
        /// How much earlier than the record before it, ns.
        by_ns: u64,
    },
    /// Fewer than two packets: no gap.
    #[error(
        "it holds {}: with `timing: trace` there are no gaps to replay",
        if *.packets == 1 { "one packet".to_owned() } else { format!("{} packets", .packets) }
    )]
    TooFew {
        /// Its packets (0 or 1).
        packets: u64,
    },
    /// Every packet at one instant.
    #[error("its {packets} packets are all stamped at one instant: with `timing: trace` there are no gaps to replay")]
    OneInstant {
        /// Its packets.
        packets: u64,
    },
}

/// A span of time for a message: `2 ms`, `1.5 s`, `250 ns`.
fn duration(ns: u64) -> String {
    let (value, unit) = match ns {
        0..1_000 => return format!("{ns} ns"),
        1_000..1_000_000 => (ns as f64 / 1e3, "µs"),
        1_000_000..1_000_000_000 => (ns as f64 / 1e6, "ms"),
        _ => (ns as f64 / 1e9, "s"),
    };
    let text = format!("{value:.3}");
    format!("{} {unit}", text.trim_end_matches('0').trim_end_matches('.'))
}

/// What the schedule needs of a trace: its packets and, for `timing: trace`, their time stamps.
#[derive(Clone, Copy, Debug)]
struct Stamps {
    /// Packet records.
    packets: u64,
    /// From the first stamp to the last, ns.
    span_ns: u64,
    /// The first record stamped before the one it follows, and by how much (ns).
    back: Option<(u64, u64)>,
    /// The longest frame, bytes.
    longest_frame: usize,
}

impl Stamps {
    /// Read the records of the pcap at `path`.
    fn of_pcap(path: &Path) -> Result<Stamps, PcapError> {
        let mut reader = Reader::open(path)?;
        let mut last: Option<u64> = None;
        let mut back = None;
        let mut record = 0;
        let mut longest_frame = 0;
        while let Some(p) = reader.next_packet()? {
            record += 1;
            longest_frame = longest_frame.max(p.data.len());
            if let Some(before) = last
                && p.ns < before
                && back.is_none()
            {
                back = Some((record, before - p.ns));
            }
            last = Some(p.ns);
        }
        Ok(Stamps { packets: reader.records(), span_ns: reader.span_ns(), back, longest_frame })
    }

    /// The mean rate the stamps give, packets per second, or why they give none.
    fn rate_pps(&self) -> Result<f64, NoTiming> {
        if let Some((record, by_ns)) = self.back {
            return Err(NoTiming::Back { record, by_ns });
        }
        let extent = latency_proto::pcap::Extent { packets: self.packets, span_ns: self.span_ns };
        match extent.rate_pps() {
            Some(rate) => Ok(rate),
            None if self.packets < 2 => Err(NoTiming::TooFew { packets: self.packets }),
            None => Err(NoTiming::OneInstant { packets: self.packets }),
        }
    }
}

/// Expand `plan` for `inventory` (`None` = simulated testbed). Fails only if a pcap trace cannot be
/// read to count its probes, or, under `timing: trace`, a trace's time stamps give no timing.
pub fn expand(plan: &Plan, inventory: Option<&Inventory>) -> Result<Schedule, ExpandError> {
    let mut groups: Vec<Group<'_>> = plan
        .programs
        .iter()
        .map(|p| Group {
            kind: SessionKind::Program,
            name: p.name.clone(),
            bitstream: &p.bitstream,
            trace: p.trace,
            table: p.table.as_ref().and_then(|t| t.file_name()).map(|f| format!("{}/{}", p.name, f.to_string_lossy())),
            sessions: p.sessions.unwrap_or(plan.protocol.sessions),
        })
        .collect();
    let mut seen = Vec::new();
    for p in &plan.programs {
        let Some(null) = &p.null else { continue };
        if !seen.contains(&p.null_trace) {
            seen.push(p.null_trace);
            groups.push(Group {
                kind: SessionKind::Null,
                name: format!("null-{}", plan.traces[p.null_trace].name),
                bitstream: null,
                trace: p.null_trace,
                table: None,
                // Adaptive sessions: its null calibration the minimum.
                sessions: plan.protocol.adaptive.map_or(plan.protocol.sessions, |a| a.min),
            });
        }
    }
    // Probes of each trace and their time stamps (generated: one per `SPACING`).
    let stamps: Vec<Stamps> = plan
        .traces
        .iter()
        .map(|t| match &t.source {
            TraceSource::Pcap { path, .. } => {
                Stamps::of_pcap(path).map_err(|source| ExpandError::Probes { trace: TraceAt::of(plan, t), source })
            }
            TraceSource::Generate(g) | TraceSource::StandIn { generate: g, .. } => {
                let spacing = latency_plan::trace::SPACING.as_nanos() as u64;
                Ok(Stamps {
                    packets: u64::from(g.count),
                    span_ns: u64::from(g.count.saturating_sub(1)) * spacing,
                    back: None,
                    // Every frame is as long as asked: a generated trace's frames hold their ids.
                    longest_frame: g.frame_len as usize,
                })
            }
        })
        .collect::<Result<_, _>>()?;
    let probes: Vec<u64> = stamps.iter().map(|e| e.packets).collect();

    let proto = &plan.protocol;
    let levels = plan.factors.levels();
    let mut sessions = Vec::new();
    let mut predicted = Predicted::default();
    let mut per_level: Vec<LevelPlan> =
        levels.iter().map(|l| LevelPlan { name: l.name(), runs: 0, seconds: 0.0 }).collect();
    let mut on_card: Option<&str> = None;
    let redrawn_by: &[Action] =
        inventory.map_or(&latency_plan::inventory::DEFAULT_MODE_REDRAWN_BY, |inv| &inv.mode_redrawn_by);
    // Predicted time of the sessions adaptive programs may not need.
    let mut beyond_min = 0.0;
    for g in &groups {
        let trace = &plan.traces[g.trace];
        let probe_format = match trace.source.generated() {
            Some(Generated { probe_id: ProbeFormat::Compact, .. }) => "compact",
            _ => "latencylab",
        };
        for (s, session_levels) in session_blocks(plan, &levels, g.kind, g.sessions) {
            let session_name = format!("{}_s{s}", g.name);
            let bitstream_file =
                g.bitstream.file.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
            // The longest frame the session's runs send: the agent's rings are sized to it.
            let longest_frame = session_levels
                .iter()
                .map(|l| stamps[plan.level_trace(g.trace, l.as_ref())].longest_frame)
                .max()
                .and_then(|l| u16::try_from(l).ok());
            // The template variables the session's first level sets: its bring-up's (a factor that
            // sets one needs `level_session_run`, one level per session).
            let first_vars: Vec<(&'static str, &str)> =
                session_levels.first().and_then(Option::as_ref).map(|l| l.vars().collect()).unwrap_or_default();
            // (run number, pacing, burst, trace file) of a run step, with the variables its level
            // sets; the protocol's for the bring-up. Templates take the pacing as a whole number.
            let render = |action: Action, run: Option<(u32, Pps, u32, &str)>, vars: &[(&'static str, &str)]| -> Step {
                match inventory {
                    None => Step {
                        host: "sim".into(),
                        action,
                        command: None,
                        estimate_s: latency_plan::inventory::default_estimate(action),
                    },
                    Some(inv) => {
                        let base_trace = trace.file_name();
                        let (run, pacing_pps, burst, trace_file) = match run {
                            Some((r, pps, burst, file)) => (Some(r), Pps::whole(pps), burst, file),
                            None => (None, proto.pacing_pps, proto.burst, base_trace.as_str()),
                        };
                        let ctx = StepContext {
                            program: &g.name,
                            session: s,
                            session_name: &session_name,
                            run,
                            bitstream_file: &bitstream_file,
                            bitstream_sha256: &g.bitstream.sha256,
                            table: g.table.as_deref(),
                            table_driver_dir: g.bitstream.table_driver_dir.as_deref(),
                            trace_file,
                            pacing_pps,
                            timing: proto.timing,
                            burst,
                            probe_format,
                            reflect: proto.reflect,
                            soak: proto.soak,
                            ports: plan.analysis.ports(),
                            longest_frame,
                            overrides: vars,
                        };
                        let command = inv.actions[&action].render(&inv.vars(&ctx)).map_err(|e| e.0);
                        Step {
                            host: action.role().name().into(),
                            action,
                            // Templates were checked against the variable catalogue when loaded.
                            command: Some(command.unwrap_or_else(|e| format!("<unrenderable: {e}>"))),
                            estimate_s: inv.estimates_s[&action],
                        }
                    }
                }
            };
            let holds_image = on_card == Some(g.bitstream.name.as_str());
            on_card = Some(g.bitstream.name.as_str());
            // Write the image (QSPI), boot it, or neither; a JTAG load is both at once.
            let put = |holds_image: bool| match proto.flash {
                FlashPolicy::EverySession => (true, true),
                FlashPolicy::OnChange => (!holds_image, !holds_image),
                // A boot from the image the card holds, where a boot redraws the mode.
                FlashPolicy::Redraw => (!(holds_image && redrawn_by.contains(&Action::Boot)), true),
            };
            let ((write, boot), (write_held, boot_held)) = (put(holds_image), put(true));
            let (steps, write_first): (Vec<Step>, Vec<Step>) = Action::ALL
                .into_iter()
                .filter(|a| a.role() == Role::Receiver && *a != Action::AgentStop)
                // The receiver runs the agent, or the reflector when the sender is the agent.
                .filter(|a| match proto.sender {
                    Sender::Tcpreplay => *a != Action::ReflectorStart,
                    Sender::Agent { .. } => *a != Action::AgentStart,
                })
                .filter(|a| match g.bitstream.programming {
                    Programming::Qspi => *a != Action::FlashJtag,
                    // Loaded over JTAG, the image runs at once: there is nothing to boot.
                    Programming::Jtag => !matches!(a, Action::Flash | Action::Boot),
                })
                .filter(|a| g.table.is_some() || g.bitstream.table_driver_dir.is_some() || *a != Action::TableLoad)
                .map(|a| render(a, None, &first_vars))
                // What puts the image on the card goes apart when the previous session left it.
                .partition(|st| match st.action {
                    Action::Flash => write,
                    Action::Boot | Action::FlashJtag => boot,
                    _ => true,
                });
            // What the session leaves out should the card turn out to hold its image.
            let unless_held: Vec<Action> = steps
                .iter()
                .map(|st| st.action)
                .filter(|a| match a {
                    Action::Flash => !write_held,
                    Action::Boot | Action::FlashJtag => !boot_held,
                    _ => false,
                })
                .collect();
            let mut runs: Vec<Run> = Vec::new();
            for level in &session_levels {
                let run_index = plan.level_trace(g.trace, level.as_ref());
                let run_trace = &plan.traces[run_index];
                let pacing_pps = match proto.timing {
                    Timing::Pps => Pps::from(
                        level
                            .as_ref()
                            .and_then(|l| l.get(latency_plan::FactorName::PacingPps))
                            .unwrap_or(proto.pacing_pps),
                    ),
                    // The rate the run checks expect: the trace's mean rate, `multiplier` times, as
                    // slow as the trace is.
                    Timing::Trace { multiplier } => {
                        let rate = stamps[run_index]
                            .rate_pps()
                            .map_err(|why| ExpandError::NoTiming { trace: TraceAt::of(plan, run_trace), why })?;
                        Pps(rate * multiplier)
                    }
                };
                let burst = level.as_ref().and_then(|l| l.get(latency_plan::FactorName::Burst)).unwrap_or(proto.burst);
                let replay_s = probes[run_index] as f64 / pacing_pps.0;
                let run_vars: Vec<(&'static str, &str)> =
                    level.as_ref().map(|l| l.vars().collect()).unwrap_or_default();
                for _ in 0..proto.runs {
                    let r = runs.len() as u32 + 1;
                    let file = run_trace.file_name();
                    let sends = match proto.sender {
                        Sender::Tcpreplay => Action::Replay,
                        Sender::Agent { .. } => Action::Originate,
                    };
                    let steps = [Action::CaptureStart, sends, Action::CaptureStop]
                        .into_iter()
                        .filter(|a| proto.reflect || *a == sends)
                        .map(|a| render(a, Some((r, pacing_pps, burst, &file)), &run_vars))
                        .collect();
                    let wait_before_s = if r == 1 { proto.settle_s } else { proto.idle_gap_s };
                    if let Some(lp) = level.as_ref().and_then(|l| per_level.iter_mut().find(|p| p.name == l.name())) {
                        lp.runs += 1;
                        lp.seconds += replay_s + wait_before_s;
                    }
                    runs.push(Run {
                        run: r,
                        level: level.clone(),
                        pacing_pps,
                        burst,
                        trace: run_trace.name.clone(),
                        probes: probes[run_index],
                        steps,
                        replay_s,
                        wait_before_s,
                    });
                }
            }
            let teardown = vec![render(Action::AgentStop, None, &first_vars)];

            let before = predicted;
            predicted.bring_up += steps.iter().map(|s| s.estimate_s).sum::<f64>();
            predicted.replay += runs.iter().map(|r| r.replay_s).sum::<f64>();
            predicted.idle_gaps += runs.iter().map(|r| r.wait_before_s).sum::<f64>();
            predicted.run_steps +=
                runs.iter().flat_map(|r| &r.steps).chain(&teardown).map(|s| s.estimate_s).sum::<f64>();
            if g.kind == SessionKind::Program && proto.adaptive.is_some_and(|a| s > a.min) {
                beyond_min += predicted.sum() - before.sum();
            }
            let agent_control = inventory.map(|inv| {
                let l = latency_plan::layout::RemoteLayout::of(inv);
                match proto.sender {
                    Sender::Tcpreplay => format!(
                        "`begin R` and `end R` written to {}; the agent's answers read from {}",
                        l.control_pipe(&session_name),
                        l.events(&session_name)
                    ),
                    Sender::Agent { .. } => format!(
                        "none: the reflector (events in {}) echoes on its own; each run's records are collected \
                         from the originator's file on the sender ({})",
                        l.events(&session_name),
                        l.originate_file(&session_name, 0).replace("run00", "runRR")
                    ),
                }
            });
            sessions.push(Session {
                index: sessions.len(),
                kind: g.kind,
                program: g.name.clone(),
                session: s,
                bitstream: g.bitstream.name.clone(),
                trace: trace.name.clone(),
                probes: probes[g.trace],
                steps,
                write_first,
                unless_held,
                identity: g.bitstream.identity(),
                runs,
                teardown,
                agent_control,
            });
        }
    }
    predicted.total = predicted.sum();
    Ok(Schedule {
        study: plan.study.clone(),
        testbed: inventory.map_or_else(|| "sim".to_string(), |i| i.name.clone()),
        sessions,
        predicted_seconds: predicted,
        factors: plan.factors.clone(),
        levels: per_level,
        adaptive_min_seconds: proto.adaptive.map(|_| predicted.total - beyond_min),
        slices: None,
        around: inventory.map_or_else(Around::default, around),
        stand_ins: match inventory {
            Some(inv) if !inv.stand_in_traces => Vec::new(),
            _ => plan.traces.iter().filter_map(Trace::stand_in_note).collect(),
        },
        refused: inventory
            .map(|inv| latency_plan::refused_on(plan, inv))
            .unwrap_or_default()
            .iter()
            .map(|d| d.to_string())
            .collect(),
    })
}

/// A group's `sessions`, each with the levels it measures (`[None]` without factors): every level
/// in each session, or each level in sessions of its own, numbered on. A null calibration measures
/// the calibration levels of the program levels (see [`Level::calibration`]).
fn session_blocks(plan: &Plan, levels: &[Level], kind: SessionKind, sessions: u32) -> Vec<(u32, Vec<Option<Level>>)> {
    let mut group_levels: Vec<Option<Level>> = Vec::new();
    for l in levels {
        let l = match kind {
            SessionKind::Program => l.clone(),
            SessionKind::Null => l.calibration(|f| plan.base_value(f)),
        };
        if !group_levels.contains(&Some(l.clone())) {
            group_levels.push(Some(l));
        }
    }
    if group_levels.is_empty() {
        group_levels.push(None);
    }
    match plan.factors.order {
        Order::SessionLevelRun => (1..=sessions).map(|s| (s, group_levels.clone())).collect(),
        Order::LevelSessionRun => group_levels
            .iter()
            .enumerate()
            .flat_map(|(i, l)| (1..=sessions).map(move |s| (i as u32 * sessions + s, vec![l.clone()])))
            .collect(),
    }
}

/// What the SSH testbed does before the first session and after the last.
fn around(inv: &Inventory) -> Around {
    use latency_plan::layout::LEASE_STALE_S;
    use latency_plan::layout::RemoteLayout;
    let l = RemoteLayout::of(inv);
    let mut before = Vec::new();
    for role in [Role::Sender, Role::Receiver] {
        before.push(format!(
            "[{}] take the lease {} (refused while another orchestrator holds it; taken over after {LEASE_STALE_S} s \
             without heartbeat or when its holder is dead); renewed after every step",
            role.name(),
            l.lease(role)
        ));
    }
    before.push(format!(
        "[receiver] stop an agent left running ({}); [sender] stop a capture left running ({})",
        l.agent_pidfile(),
        l.capture_pidfile()
    ));
    before.push("upload what is missing or differs (traces, tables, images, the agent), each checked by sha256".into());
    before.push(format!(
        "[receiver] read the card back (the `readback` step) before the first bring-up writes anything: a card that is \
         not a {} stops the study; an image it already runs is not written again where `flash` allows",
        inv.board.name().to_uppercase()
    ));
    let after = vec![
        format!(
            "[receiver] stop the agent ({}); [sender] stop the capture ({})",
            l.agent_pidfile(),
            l.capture_pidfile()
        ),
        "[sender] [receiver] release the leases".into(),
    ];
    Around { before, after }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_read_in_their_unit() {
        let read: Vec<String> = [250, 1_500, 2_000_000, 9_900_000_000, 1_234_567].into_iter().map(duration).collect();
        assert_eq!(read, ["250 ns", "1.5 µs", "2 ms", "9.9 s", "1.235 ms"]);
    }

    #[test]
    fn stamps_give_a_rate_or_say_why_not() {
        let s = |packets, span_ns, back| Stamps { packets, span_ns, back, longest_frame: 0 };
        assert_eq!(s(400, 399 * 9_900_000_000, None).rate_pps(), Ok(1.0 / 9.9));
        assert_eq!(
            s(3, 3_000_000, Some((3, 2_000_000))).rate_pps(),
            Err(NoTiming::Back { record: 3, by_ns: 2_000_000 })
        );
        assert_eq!(s(1, 0, None).rate_pps(), Err(NoTiming::TooFew { packets: 1 }));
        assert_eq!(s(3, 0, None).rate_pps(), Err(NoTiming::OneInstant { packets: 3 }));
    }
}
