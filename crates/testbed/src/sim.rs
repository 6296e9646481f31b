//! The simulated testbed: a digital twin of the U280 testbed that produces, per run, the records
//! the receiver agent would write, in the agent's schema, through the same engine and results
//! store as a real testbed. See [`super::model`] for the model and its parameters.
//!
//! Every random draw is keyed by (seed, program, session, run, attempt), never by the order in
//! which runs happen, so an interrupted and resumed study produces exactly the same data. Each
//! level's terms have draws of their own: a session's (mode, δ, shift) by (seed, program,
//! session), a run's (wander phase, null offset) by (seed, program, session, run, attempt), and a
//! copy's noise from the run's stream.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::thread::JoinHandle;

use latency_proto::{Port, RecordBuilder};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::model::{ProgramModel, SimModel};
use super::replay::ReplayReport;
use super::{Cancel, RunData, Testbed, TestbedError};
use latency_plan::Generated;
use latency_plan::Plan;
use latency_plan::digest::key;
use latency_plan::probes;
use latency_results::SessionKind;
use latency_results::provenance::{Facts, TestbedKind};
use latency_schedule::Run;
use latency_schedule::Session;
use latency_schedule::Step;

/// Records per Arrow batch, as the agent flushes them.
const BATCH: usize = 8192;
/// Runs of a session generated ahead, each on a thread of its own, while the engine checks and
/// stores the current one. One keeps both cores of a small machine busy; two measured no faster
/// (`make bench-sim`: the engine's own thread then gets less of them).
const AHEAD: usize = 1;
/// TSC value at the start of the study (the receiver has been up for a while).
const TSC_BASE: u64 = 1_000_000_000_000;
/// Sender-to-receiver propagation of both copies (switch + cables + MAC), ns.
const WIRE_NS: f64 = 1500.0;
/// Reflected copies: receiver-to-sender path, ns.
const REFLECT_NS: f64 = 5000.0;
/// Preamble, start delimiter, FCS and inter-frame gap around every Ethernet frame on the wire, bytes.
const ETHERNET_OVERHEAD: u32 = 24;
/// Frame length recorded for a pcap trace, whose frames the simulator does not read, bytes.
const FRAME_LEN: u16 = 128;

/// What the simulator needs to know of a bitstream.
#[derive(Clone)]
struct BitstreamInfo {
    null: bool,
    bound_cycles: Option<u32>,
    period_ns: f64,
}

/// The twin's model of one study: every draw a function of its key (see the module's notes), so
/// that runs can be generated in any order and on any thread.
#[derive(Clone)]
pub struct Twin {
    model: SimModel,
    seed: u64,
    idle_gap_s: f64,
    reflect: bool,
    /// The sender is the agent: bypass stamps are its transmissions, pipeline stamps its echoes.
    rtt: bool,
    /// Capture ports past the pipeline and bypass ones (`analysis.port_pairs`): each after one
    /// more card running the same image, a link further on.
    further_ports: usize,
    /// Soak mode: each run also gets the histogram log the agent would write.
    soak: Option<latency_plan::Soak>,
    realtime: bool,
    bitstreams: BTreeMap<String, BitstreamInfo>,
    /// Trace name → how it is generated (for δ, the forwarded destinations and frame lengths);
    /// none for a pcap.
    templates: BTreeMap<String, Option<Generated>>,
}

/// The simulated testbed: the [`Twin`], the packet-dependent latencies it has drawn, and the next
/// run of the current session, generated on another thread while the engine stores this one.
pub struct SimTestbed {
    twin: Arc<Twin>,
    /// Packet-dependent latency per (bitstream, mode), indexed by probe id.
    packet_part: BTreeMap<(String, usize), Arc<Vec<f64>>>,
    /// Runs being generated ahead: (session index, run, attempt) and its thread.
    ahead: Vec<((usize, u32, u32), JoinHandle<RunData>)>,
}

impl std::ops::Deref for SimTestbed {
    type Target = Twin;
    fn deref(&self) -> &Twin {
        &self.twin
    }
}

fn rng(parts: &[&[u8]]) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(key(parts))
}

impl SimTestbed {
    /// A simulator for `plan` with `model`. `realtime` makes steps and replays take their modelled
    /// wall time.
    pub fn new(plan: &Plan, model: SimModel, realtime: bool) -> Self {
        let mut bitstreams = BTreeMap::new();
        for p in &plan.programs {
            for b in p.images() {
                bitstreams.insert(
                    b.name.clone(),
                    BitstreamInfo { null: b.null, bound_cycles: b.vendor_bound_cycles, period_ns: 1e3 / b.clock_mhz },
                );
            }
        }
        let templates = plan.traces.iter().map(|t| (t.name.clone(), t.source.generated().copied())).collect();
        let twin = Twin {
            model,
            seed: plan.protocol.seed,
            idle_gap_s: plan.protocol.idle_gap_s,
            reflect: plan.protocol.reflect,
            rtt: plan.protocol.sender != latency_plan::Sender::Tcpreplay,
            further_ports: plan.analysis.ports() - 2,
            soak: plan.protocol.soak,
            realtime,
            bitstreams,
            templates,
        };
        SimTestbed { twin: Arc::new(twin), packet_part: BTreeMap::new(), ahead: Vec::new() }
    }

    /// Override the seed (the `--seed` flag).
    pub fn with_seed(mut self, seed: u64) -> Self {
        Arc::make_mut(&mut self.twin).seed = seed;
        self.packet_part.clear();
        self
    }

    /// Packet-dependent latency of every probe id (index = id) for a bitstream and mode.
    fn packet_part(&mut self, bitstream: &str, mode: usize, probes: u64) -> Arc<Vec<f64>> {
        let twin = Arc::clone(&self.twin);
        let entry = self.packet_part.entry((bitstream.to_string(), mode)).or_default();
        if entry.len() as u64 <= probes {
            let model = twin.program_model(bitstream);
            *entry = Arc::new((0..=probes).map(|id| model.inverse_cdf(mode, twin.packet_u(bitstream, id))).collect());
        }
        Arc::clone(entry)
    }

    /// Generate the records of one run.
    pub fn generate(&mut self, session: &Session, run: &Run, attempt: u32) -> RunData {
        let lat = self.packet_part(&session.bitstream, self.session_mode_of(session), run.probes);
        self.twin.generate(&lat, session, run, attempt)
    }

    /// The records of a run, generated ahead when they were; then the session's next runs started
    /// on other threads, [`AHEAD`] at a time (first attempts: a retry is generated when it is asked
    /// for).
    fn records(&mut self, session: &Session, run: &Run, attempt: u32) -> RunData {
        let key = (session.index, run.run, attempt);
        let mine = self.ahead.iter().position(|(k, _)| *k == key).map(|at| self.ahead.remove(at).1);
        // Runs of other sessions or attempts will not be asked for.
        self.ahead.retain(|((index, _, _), _)| *index == session.index);
        for next in session.runs.iter().skip_while(|r| r.run != run.run).skip(1).take(AHEAD) {
            let key = (session.index, next.run, 1);
            if self.ahead.iter().any(|(k, _)| *k == key) {
                continue;
            }
            let lat = self.packet_part(&session.bitstream, self.session_mode_of(session), next.probes);
            let (twin, session, next) = (Arc::clone(&self.twin), session.clone(), next.clone());
            self.ahead.push((key, std::thread::spawn(move || twin.generate(&lat, &session, &next, 1))));
        }
        match mine.map(JoinHandle::join) {
            Some(Ok(data)) => data,
            Some(Err(panic)) => std::panic::resume_unwind(panic),
            None => self.generate(session, run, attempt),
        }
    }
}

impl Twin {
    /// The latency model of a session's bitstream.
    pub fn program_model(&self, bitstream: &str) -> ProgramModel {
        match self.bitstreams.get(bitstream) {
            Some(b) => self.model.program(bitstream, b.null, b.bound_cycles, b.period_ns),
            None => self.model.program(bitstream, false, None, 4.0),
        }
    }

    /// The model latency of one probe (the packet-dependent part; ground truth for tests).
    pub fn packet_latency(&self, bitstream: &str, mode: usize, id: u64) -> f64 {
        self.program_model(bitstream).inverse_cdf(mode, self.packet_u(bitstream, id))
    }

    /// The probe's fixed position in its program's latency distribution, in [0, 1).
    fn packet_u(&self, bitstream: &str, id: u64) -> f64 {
        (key(&[&self.seed.to_le_bytes(), b"packet", bitstream.as_bytes(), &id.to_le_bytes()]) >> 11) as f64
            / (1u64 << 53) as f64
    }

    /// The reset mode a session lands in. The mode is decided when the FPGA is configured (a
    /// flash with its boot, a boot from flash, a JTAG load: the model's `mode_redrawn_by`) and kept
    /// until the next, so it is drawn per such bring-up: a session without one (`flash:
    /// on_change`, the image already on the card) keeps the mode of its program's first session.
    pub fn session_mode(&self, session: &Session, modes: usize) -> usize {
        if modes < 2 {
            return 0;
        }
        let redraws = session.steps.iter().any(|s| self.model.mode_redrawn_by.contains(&s.action));
        let flash = if redraws { session.session } else { 1 };
        let mut r = rng(&[&self.seed.to_le_bytes(), b"mode", session.program.as_bytes(), &flash.to_le_bytes()]);
        if let Some(w) = self.model.mode_weights.get(&session.bitstream).filter(|w| w.len() == modes) {
            let u = r.random::<f64>() * w.iter().sum::<f64>();
            let mut acc = 0.0;
            return w
                .iter()
                .position(|x| {
                    acc += x;
                    u < acc
                })
                .unwrap_or(modes - 1);
        }
        if r.random::<f64>() < self.model.mode_change_prob { 1 + r.random_range(0..modes - 1) } else { 0 }
    }

    /// The port asymmetry δ of a session, ns: the trace's, its spread between sessions and, in a
    /// null session, the null's session offset.
    pub fn session_delta(&self, session: &Session) -> f64 {
        let template = self.template_name(&session.trace);
        let mut r =
            rng(&[&self.seed.to_le_bytes(), b"delta", session.program.as_bytes(), &session.session.to_le_bytes()]);
        let delta = self.model.delta(&template) + self.model.session_delta_spread_ns * (r.random::<f64>() - 0.5);
        if session.kind == SessionKind::Null && self.model.null_session_sd_ns > 0.0 {
            let mut r = rng(&[
                &self.seed.to_le_bytes(),
                b"null-session",
                session.program.as_bytes(),
                &session.session.to_le_bytes(),
            ]);
            return delta + self.model.null_session_sd_ns * normal(&mut r);
        }
        delta
    }

    /// The shift of a program session's pipeline path within its mode (one per bring-up), ns; 0
    /// in a null session.
    pub fn session_shift(&self, session: &Session) -> f64 {
        if session.kind != SessionKind::Program || self.model.session_shift_ns == 0.0 {
            return 0.0;
        }
        let mut r =
            rng(&[&self.seed.to_le_bytes(), b"shift", session.program.as_bytes(), &session.session.to_le_bytes()]);
        self.model.session_shift_ns * normal(&mut r)
    }

    /// A run's own terms: the phase of its wander (radians) and, in a null session, the null's run
    /// offset (ns).
    pub fn run_terms(&self, session: &Session, run: &Run, attempt: u32) -> (f64, f64) {
        let mut r = rng(&[
            &self.seed.to_le_bytes(),
            b"run-terms",
            session.program.as_bytes(),
            &session.session.to_le_bytes(),
            &run.run.to_le_bytes(),
            &attempt.to_le_bytes(),
        ]);
        let phase = std::f64::consts::TAU * r.random::<f64>();
        let null = if session.kind == SessionKind::Null { self.model.null_run_sd_ns * normal(&mut r) } else { 0.0 };
        (phase, null)
    }

    fn template_name(&self, trace: &str) -> String {
        match self.templates.get(trace).copied().flatten() {
            Some(g) => g.template.name().to_owned(),
            None => trace.to_string(),
        }
    }

    /// The reset mode of a session's bitstream it lands in.
    fn session_mode_of(&self, session: &Session) -> usize {
        self.session_mode(session, self.program_model(&session.bitstream).modes.len())
    }

    /// Generate the records of one run, `lat` the packet-dependent latencies of its session's
    /// bitstream and mode by probe id.
    fn generate(&self, lat: &[f64], session: &Session, run: &Run, attempt: u32) -> RunData {
        let m = self.model.clone();
        let generated = self.templates.get(&run.trace).copied().flatten();
        let template = generated.map(|g| g.template);
        // Frames as replayed; a pcap's are not known here.
        let (frame_len, tagged) = generated.map_or((FRAME_LEN, false), |g| (g.frame_len as u16, g.vlan.is_some()));
        // Session and run terms, common to every probe of the run (see the model's levels).
        let (phase, null_run) = self.run_terms(session, run, attempt);
        let offset = self.session_delta(session) + self.session_shift(session) + null_run;
        let wander_amplitude = std::f64::consts::SQRT_2 * m.wander_ns;
        let wander_step = std::f64::consts::TAU / m.wander_period_probes;
        let n = run.probes;
        let mut r = rng(&[
            &self.seed.to_le_bytes(),
            b"run",
            session.program.as_bytes(),
            &session.session.to_le_bytes(),
            &run.run.to_le_bytes(),
            &attempt.to_le_bytes(),
        ]);
        let pps = f64::from(run.pacing_pps) * (1.0 + m.pacing_error);
        let interval = 1e9 / pps;
        // Times are ns from the run's start (f64 keeps sub-ns precision there); the run's place on
        // the study's TSC time line is added in integer ticks.
        let run_span_s = (run.replay_s + self.idle_gap_s).ceil() as u64 + 1;
        let start_s = session.index as u64 * 1_000_000 + u64::from(run.run) * run_span_s;
        let tsc_start = TSC_BASE + (start_s as f64 * m.tsc_hz) as u64;
        // RemoveHeader removes the VLAN tag on the pipeline path.
        let pipeline_len = if session.kind == SessionKind::Program
            && tagged
            && template == Some(latency_plan::TraceTemplate::RemoveHeader)
        {
            frame_len - 4
        } else {
            frame_len
        };

        // Copies the receiver's NIC drops: lost like `loss`, but counted (as the agent reports them).
        let nic_drops = std::cell::Cell::new(0u64);
        let copy = |r: &mut ChaCha8Rng, t: f64| -> Option<f64> {
            if m.loss > 0.0 && r.random::<f64>() < m.loss {
                return None;
            }
            if m.nic_drop_prob > 0.0 && r.random::<f64>() < m.nic_drop_prob {
                nic_drops.set(nic_drops.get() + 1);
                return None;
            }
            let mut x = t + m.poll_phase_ns * r.random::<f64>() + m.dma_jitter_ns * normal(r);
            if r.random::<f64>() < m.outlier_prob {
                x += r.random_range(m.outlier_ns[0]..=m.outlier_ns[1]);
            }
            Some(x)
        };
        let mut pipe: Vec<(f64, u64)> = Vec::with_capacity(n as usize);
        let mut byp: Vec<(f64, u64)> = Vec::with_capacity(n as usize);
        let mut further: Vec<Vec<(f64, u64)>> = vec![Vec::new(); self.further_ports];
        let (mut first_sent, mut last_sent) = (f64::INFINITY, f64::NEG_INFINITY);
        // Bursts: `burst` probes back to back at line rate, one burst every `burst` intervals, the
        // sender's jitter moving each burst as a whole.
        let burst = if m.sender_bursts { u64::from(run.burst.max(1)) } else { 1 };
        let burst_ns = interval * burst as f64;
        let wire_ns = f64::from(u32::from(frame_len) + ETHERNET_OVERHEAD) * 8.0 / m.line_gbps;
        let mut jitter = 0.0;
        for id in probes::ids(n) {
            let (b, j) = ((id - 1) / burst, (id - 1) % burst);
            if j == 0 {
                jitter = (m.pacing_jitter_ns * normal(&mut r)).clamp(-burst_ns / 3.0, burst_ns / 3.0);
            }
            let sent = b as f64 * burst_ns + j as f64 * wire_ns + jitter;
            (first_sent, last_sent) = (first_sent.min(sent), last_sent.max(sent));
            let arrive = sent + WIRE_NS;
            // An originator stamps each probe as it sends it: nothing is lost before that.
            let transmitted = if self.rtt { Some(sent) } else { copy(&mut r, arrive) };
            if let Some(t) = transmitted {
                byp.push((t, id));
            }
            let forwards = session.kind == SessionKind::Null || template.is_none_or(|t| probes::forwarded(t, id));
            if forwards {
                let queue =
                    m.queue_wait_ns(&session.bitstream, pps, id - 1) + m.burst_wait_ns(&session.bitstream, j, wire_ns);
                let length = m.length_ns(&session.bitstream, u32::from(frame_len));
                let wander = wander_amplitude * (wander_step * (id - 1) as f64 + phase).sin();
                let mut t = arrive + lat[id as usize] + length + offset + queue + wander;
                if id == 1 {
                    t += r.random_range(m.first_probe_ns[0]..=m.first_probe_ns[1]);
                }
                if let Some(x) = copy(&mut r, t) {
                    // Its echo, stamped by the originator.
                    let back = if self.rtt { m.echo_return_ns + m.poll_phase_ns * r.random::<f64>() } else { 0.0 };
                    pipe.push((x + back, id));
                }
                // The next cards of a multi-hop path: the same image, one link further each.
                for hop in &mut further {
                    t += WIRE_NS + lat[id as usize] + length + offset;
                    hop.extend(copy(&mut r, t).map(|x| (x, id)));
                }
            }
        }
        // Every copy in time order (a tie: the pipeline's first, then the bypass's, then further
        // ports'), numbered per port.
        let total = pipe.len() + byp.len() + further.iter().map(Vec::len).sum::<usize>();
        let mut copies: Vec<(f64, u64, u8, u16)> = Vec::with_capacity(total);
        let ports = [(Port::Pipeline as u8, pipeline_len, pipe), (Port::Bypass as u8, frame_len, byp)]
            .into_iter()
            .chain(further.into_iter().enumerate().map(|(k, v)| (k as u8 + 2, pipeline_len, v)));
        for (port, len, v) in ports {
            copies.extend(v.into_iter().map(|(t, id)| (t, id, port, len)));
        }
        copies.sort_by(|a, b| a.0.total_cmp(&b.0));

        let ticks_per_ns = m.tsc_hz / 1e9;
        let mut batches = Vec::new();
        let mut b = RecordBuilder::with_capacity(BATCH);
        let mut seqs = vec![0u64; 2 + self.further_ports];
        for (t, id, port, len) in copies {
            let seq = seqs[port as usize];
            seqs[port as usize] += 1;
            let hw_start = start_s as i64 * 1_000_000_000;
            let hw = self.reflect.then(|| hw_start + round(t + REFLECT_NS + m.reflect_channel_ns * normal(&mut r)));
            // The first probe can arrive before the run's nominal start (the sender's jitter): its
            // time is then negative, which a cast to u64 would clamp to the run's start.
            let tsc = tsc_start.saturating_add_signed(round(t * ticks_per_ns));
            b.push_index(id, port, tsc, seq, len, hw);
            if b.len() == BATCH {
                batches.extend(b.finish().ok());
            }
        }
        if !b.is_empty() {
            batches.extend(b.finish().ok());
        }
        // What tcpreplay would report of this replay.
        let replay = ReplayReport { packets: n, seconds: ((last_sent - first_sent) / 1e9).max(0.0), failed: 0 };
        let histogram = self.soak.map(|s| super::soak::log_from_records(&batches, m.tsc_hz, s.interval_s, run.run));
        // A soak without records keeps only the histograms and the agent's counts, as it pairs
        // the copies it sees (with records, the controller pairs them itself).
        let agent_counts = self.soak.is_some_and(|s| !s.records).then(|| {
            let counts = latency_results::pairs::pair(&batches).counts;
            batches.clear();
            counts
        });
        RunData {
            batches,
            seconds: run.replay_s,
            replay: Some(replay),
            reflected_loops: 0,
            nic_drops: nic_drops.get(),
            histogram,
            agent_counts,
        }
    }

    fn step_fails(&self, session: &Session, what: &str, attempt: u32) -> bool {
        let u = key(&[
            &self.seed.to_le_bytes(),
            b"fault",
            session.program.as_bytes(),
            &session.session.to_le_bytes(),
            what.as_bytes(),
            &attempt.to_le_bytes(),
        ]) as f64
            / u64::MAX as f64;
        u < self.model.step_failure_prob
    }

    /// Take `seconds` of wall time with `--realtime`; otherwise the time is only modelled.
    fn pause(&self, seconds: f64, cancel: &Cancel) -> Result<(), TestbedError> {
        if self.realtime { super::sleep(seconds, cancel) } else { Ok(()) }
    }
}

impl Testbed for SimTestbed {
    fn name(&self) -> String {
        "sim".into()
    }

    fn facts(&self) -> Facts {
        Facts {
            kind: Some(TestbedKind::Simulated),
            model: Some(serde_json::to_value(&self.model).expect("the model is plain data with string keys")),
            seed: Some(self.seed),
            ..Facts::default()
        }
    }

    fn tsc_hz(&self) -> f64 {
        self.model.tsc_hz
    }

    fn step(&mut self, session: &Session, step: &Step, attempt: u32, cancel: &Cancel) -> Result<f64, TestbedError> {
        if cancel.is_cancelled() {
            return Err(TestbedError::Interrupted);
        }
        let seconds =
            self.model.step_s.get(&step.action).copied().unwrap_or(step.estimate_s) * self.model.step_time_scale;
        self.pause(seconds, cancel)?;
        if self.step_fails(session, step.action.name(), attempt) {
            return Err(TestbedError::Failed {
                host: "sim".into(),
                action: step.action.into(),
                message: "simulated fault".into(),
            });
        }
        Ok(seconds)
    }

    fn wait(&mut self, seconds: f64, cancel: &Cancel) -> Result<(), TestbedError> {
        self.pause(seconds, cancel)
    }

    fn run(&mut self, session: &Session, run: &Run, attempt: u32, cancel: &Cancel) -> Result<RunData, TestbedError> {
        if cancel.is_cancelled() {
            return Err(TestbedError::Interrupted);
        }
        self.pause(run.replay_s, cancel)?;
        Ok(self.records(session, run, attempt))
    }

    fn reproducible(&self) -> bool {
        true
    }

    fn cleanup(&mut self) {
        self.ahead.clear();
    }
}

/// `x.round() as i64` (halves away from zero), with integer arithmetic: `f64::round` is a call
/// into the C library on a baseline x86-64 target, and the simulator rounds two stamps per copy.
/// Below 2⁵² the fraction `x − trunc(x)` is exact, so the result is the same to the bit; at or
/// above, `x` is a whole number (or not finite) already.
fn round(x: f64) -> i64 {
    if x.abs() >= 4_503_599_627_370_496.0 {
        return x as i64;
    }
    let i = x as i64;
    let fraction = x - i as f64;
    if fraction >= 0.5 {
        i + 1
    } else if fraction <= -0.5 {
        i - 1
    } else {
        i
    }
}

/// Standard normal draw (Box–Muller), written here rather than taken from `rand_distr` so that a
/// seed gives bit-for-bit the same draws whatever the dependency versions: a resumed or repeated
/// study must reproduce its data exactly.
pub fn normal(r: &mut ChaCha8Rng) -> f64 {
    let u1: f64 = 1.0 - r.random::<f64>();
    let u2: f64 = r.random::<f64>();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod twin_tests;
