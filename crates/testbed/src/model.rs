//! Parameters of the simulated testbed (the digital twin of the U280 testbed).
//!
//! | parameter | default | meaning |
//! |---|---|---|
//! | `tsc_hz` | 2.89e9 | receiver TSC rate (the OCT receiver's 2.890 GHz) |
//! | `poll_phase_ns` | 6 | each copy waits U(0, x) ns for its busy-polling loop |
//! | `dma_jitter_ns` | 10 | σ of the per-copy DMA/PCIe timing noise (normal) |
//! | `wander_ns` | 8 | σ of the slow wander of the pipeline copy: a sinusoid with a random phase per run |
//! | `wander_period_probes` | 150 | the wander's period, in probes (0.3 s at the paper's 500 pps) |
//! | `outlier_prob` | 0.0002 | probability that a copy is delayed by an outlier |
//! | `outlier_ns` | [100, 800] | range of outlier delays (uniform) |
//! | `first_probe_ns` | [20, 60] | extra delay of the pipeline copy of the first probe after an idle gap |
//! | `loss` | 0 | probability that a copy is lost |
//! | `nic_drop_prob` | 0 | probability that the receiver's NIC drops a copy (lost, and counted as the agent counts NIC and ring drops) |
//! | `session_shift_ns` | 1 | σ of a program session's shift of its pipeline path within its mode (normal, one per bring-up) |
//! | `session_delta_spread_ns` | 0.4 | session-to-session spread (range) of the port asymmetry δ, every session |
//! | `null_session_sd_ns` | 1.5 | σ of a null session's offset (normal, one per bring-up) |
//! | `null_run_sd_ns` | 5 | σ of a null run's offset (normal, one per run) |
//! | `pacing_jitter_ns` | 2000 | σ of the sender's departure-time jitter |
//! | `reflect_channel_ns` | 4 | σ of the hardware-clock channel noise per reflected copy |
//! | `step_failure_prob` | 0 | probability that a bring-up step attempt fails (exercises retries) |
//! | `step_time_scale` | 1 | a step takes its predicted time × this (wall time with `--realtime`) |
//! | `mode_redrawn_by` | [flash, boot, flash_jtag] | the bring-up steps after which a session lands in a new reset mode (a session without one keeps its program's) |
//! | `step_s` | none | seconds each step takes on the twin, per action (absent: its predicted time) |
//! | `mode_change_prob` | 0.5 | multi-mode programs: probability that a bring-up lands in each non-first mode |
//! | `delta_ns` | per trace template | port asymmetry δ of each trace: forward 17, five_tuple 14, remove_header 28, checksum 24; other traces 20 |
//! | `programs` | per bitstream | latency quantiles (p5 p25 p50 p75 p95 p99, ns) of each mode as the paper's reading measures them: the paper's Table I |
//! | `packet_scale` | 0.6 | the packet-dependent part spreads about each mode's median by this × the spread of its `programs` quantiles |
//! | `mode_weights` | per bitstream | relative frequency of each mode at a bring-up (else: the first mode with probability 1 − `mode_change_prob`, the others evenly) |
//! | `line_gbps` | 100 | line rate of a burst's back-to-back probes (each frame plus 24 B of preamble, FCS and gap) |
//! | `sender_bursts` | true | whether the sender sends bursts as asked (false: evenly paced, caught by the run checks) |
//! | `capacity_pps` | per bitstream | service rate μ of the pipeline path: forward 20e6, five_tuple 15e6, remove_header 20e6, checksum 10e6; others unlimited |
//! | `ns_per_byte` | per bitstream | latency added per byte of the entering frame: int_transit 0.0625 (one 4 ns cycle per 64-byte beat of the 512-bit bus, the frame realigned behind the header it inserts); others 0 |
//!
//! The packet-dependent part of a probe's latency is drawn once per (bitstream, probe id) by
//! inverting the piecewise-linear CDF through the program's quantiles narrowed by `packet_scale`
//! about the median, so it repeats across runs and sessions. A bitstream without an entry gets one
//! mode centred at 68 % of its vendor bound (not narrowed); a null bitstream has zero pipeline
//! latency.
//!
//! # Variance per level
//!
//! A differential of probe `i` in run `r` of session `s` is, in the twin,
//!
//! ```text
//! D = packet part(i, mode of s) + δ(trace) + shift(s) + wander(r, i) + copy noise(r, i)
//!     (+ null offset(s) + null offset(r) in a null session)
//! ```
//!
//! each term belonging to one level, so that the paper's estimator varies at each level (probe,
//! run, session = one bring-up) as it does on the testbed. The defaults were calibrated against
//! the public LatencyLab data and the paper: `testbeds/sim/calibration/` holds the calibration
//! (`report.md`, whose sections are in brackets below, and the scripts and data that reproduce
//! it). `sim/twin_tests.rs` holds each term to its parameters, a Forward run to the real one, and
//! five bring-ups to the paper's session bands.
//!
//! - **probe**, within a run: the copies' noise — the poll phase U(0, 6) and `dma_jitter_ns` per
//!   copy, σ 14.3 for a pair — and the wander,
//!   √2·`wander_ns`·sin(2π(i − 1)/`wander_period_probes` + φ) with φ uniform per run. A real
//!   Forward run (FWD s1 run 4, 13,799 probes) has a robust σ of 16.3 ns, of which 14.1 is white
//!   after a 31-probe rolling median (CS 16.3, FT 14.8: one 404-probe window of CS s1 run 1 and
//!   FT s1 run 1); the rest wanders by σ 7.7 (FWD; 10–12 for CS, FT and the null) with a period of
//!   135–171 probes and a phase of its own in every run [§4].
//!   The white part less the packet part's 4.6 ns leaves 13.3 ns for a pair: 9.2–10 per copy.
//!   The data cannot tell whether the period is one of time or of probes (all at 500 pps).
//! - **probe identity**, repeating across runs: the packet part. The same probes correlate by only
//!   0.02–0.12 across runs (FWD s1 runs 1, 2, 4; 460 probes): σ ≈ 5.5 ns, at most 9.8 [§4.3]. The
//!   paper's Table I is what its reading measures — per-session 10-run medians, pooled — and that
//!   reading of the noise alone spans −10 … +16.5 ns about Forward's median: a packet part of
//!   `packet_scale` 0.5–0.6 times Table I's spread (σ 3.8–4.6 ns) reproduces it
//!   (`packet_part.py`) [§5].
//! - **run**: nothing for a program — Forward's run medians spread no more than their within-run
//!   sampling (FWD s1 runs 1, 2, 4; s4 runs 1, 2) [§3a]. A null run moves by `null_run_sd_ns`:
//!   both copies race through the bypass, and the share of the null's lower cluster changes from
//!   run to run (0.20–0.42) [§4.6].
//! - **session**: the reset mode (drawn per flash), the shift `session_shift_ns` of a program's
//!   pipeline path and the offset `null_session_sd_ns` of a null session. Five Forward sessions
//!   (392-probe windows, 6 runs) give σ 1.7 ns, with a 95 % interval of about 0–5 [§2, §3]; the
//!   paper's raw session medians, five bring-ups of 10 runs within 2 ns for Forward (165–167) and
//!   4 for Checksum (386–390), give σ ≈ 1 (0.8–1 for a 1–2 ns band [§3c]). Single null runs
//!   spread by σ 5.3 ns (6 runs of 3 sessions, window noise removed) [§2]; how that splits
//!   between runs and sessions the data barely tell [§3a], and the paper's spread of five 10-run
//!   session offsets, under 7 ns, bounds the session part: 1.5 per session and 5 per run give
//!   single runs σ 5.2 and session offsets σ 2.2, whose range over five sessions is typically
//!   4.5–5.7 ns and under 7 ns in 75–95 % of studies. A program gets none of the null's terms: its
//!   raw session medians would spread by 5 ns and more, not 1–2.
//!
//! δ per trace: the paper's raw session medians less its L̂ medians give Forward 166 − 149 = 17
//! and Checksum 388 − 364 = 24 (the data's 6 Forward null runs: 18.8 [§2]); the paper's range of
//! offsets, 14–28 ns, leaves 14 and 28 to FiveTuple (FT s1's window: 153 − 137 = 16) and
//! RemoveHeader.
//!
//! Not modelled, since no level's variance needs them [§4, §6]: the null's bimodal shape (+31 /
//! −27 ns), a program's differential collapsing to null-like values (0.35 % of probes, more at a
//! run's start), the start-of-run transient (−7 ns for ~600 probes), the hardware clock's 6.4 ns
//! grid and heavy tails, the sender's 0.11 % slow pacing.
//!
//! Load: at an offered load ρ = pps / μ below 1, every pipeline copy waits the mean M/D/1 queueing
//! delay ρ / (2μ(1 − ρ)) (flat at low load, rising sharply near capacity); at ρ ≥ 1 the queue grows
//! by 1/μ − 1/pps per probe. The paper's 500 pps adds at most 2.5 ps. In a burst, the j-th probe
//! (from 0) also waits j × (1/μ − t_wire) behind the others, t_wire being a frame's time on the
//! wire.

use std::collections::BTreeMap;

use serde::Serialize;

use latency_plan::Action;
use latency_plan::yaml::Decoder;
use latency_plan::yaml::Node;

/// The quantile levels (in percent) of [`ProgramModel`] tables.
pub const LEVELS: [f64; 6] = [5.0, 25.0, 50.0, 75.0, 95.0, 99.0];

/// Latency model of one program: one quantile table per reset mode.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct ProgramModel {
    /// Quantiles at [`LEVELS`], ns, per mode (first = most likely).
    pub modes: Vec<[f64; 6]>,
}

impl ProgramModel {
    /// The latency at cumulative probability `u` in mode `mode`: piecewise-linear between the
    /// quantiles, with tails extended by half the neighbouring interval to p0 and p100.
    pub fn inverse_cdf(&self, mode: usize, u: f64) -> f64 {
        let q = &self.modes[mode];
        let p0 = q[0] - (q[1] - q[0]) / 2.0;
        let p100 = q[5] + (q[5] - q[4]) / 2.0;
        let knots =
            [(0.0, p0), (0.05, q[0]), (0.25, q[1]), (0.5, q[2]), (0.75, q[3]), (0.95, q[4]), (0.99, q[5]), (1.0, p100)];
        for w in knots.windows(2) {
            let ((u0, x0), (u1, x1)) = (w[0], w[1]);
            if u <= u1 {
                return x0 + (x1 - x0) * (u - u0) / (u1 - u0);
            }
        }
        p100
    }

    /// The true median of mode `mode`.
    pub fn median(&self, mode: usize) -> f64 {
        self.modes[mode][2]
    }

    /// Every mode's quantiles moved `k` times their distance from its median towards it (`k` = 1:
    /// unchanged).
    pub fn narrowed(&self, k: f64) -> ProgramModel {
        ProgramModel { modes: self.modes.iter().map(|q| q.map(|x| q[2] + k * (x - q[2]))).collect() }
    }
}

/// All parameters of the simulated testbed.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct SimModel {
    /// Receiver TSC rate.
    pub tsc_hz: f64,
    /// Busy-poll phase range per copy, ns.
    pub poll_phase_ns: f64,
    /// DMA/PCIe jitter σ per copy, ns.
    pub dma_jitter_ns: f64,
    /// σ of the slow wander of the pipeline copy (a sinusoid with a random phase per run), ns.
    #[serde(default)]
    pub wander_ns: f64,
    /// Period of the wander, probes.
    #[serde(default = "default_wander_period")]
    pub wander_period_probes: f64,
    /// Outlier probability per copy.
    pub outlier_prob: f64,
    /// Outlier delay range, ns.
    pub outlier_ns: [f64; 2],
    /// Extra delay of the first probe after an idle gap, ns.
    pub first_probe_ns: [f64; 2],
    /// Loss probability per copy.
    pub loss: f64,
    /// Probability that the receiver's NIC drops a copy (counted).
    #[serde(default)]
    pub nic_drop_prob: f64,
    /// Range of the per-session δ offset, ns.
    pub session_delta_spread_ns: f64,
    /// σ of a program session's shift of its pipeline path within its mode, ns.
    #[serde(default)]
    pub session_shift_ns: f64,
    /// σ of a null session's offset, ns.
    #[serde(default)]
    pub null_session_sd_ns: f64,
    /// σ of a null run's offset, ns.
    #[serde(default)]
    pub null_run_sd_ns: f64,
    /// Sender departure jitter σ, ns.
    pub pacing_jitter_ns: f64,
    /// Relative error of the sender's rate: 0.1 replays 10 % faster than planned, −0.1 slower.
    pub pacing_error: f64,
    /// Hardware-clock channel noise σ per reflected copy, ns.
    pub reflect_channel_ns: f64,
    /// Probability of a non-first mode at a bring-up.
    pub mode_change_prob: f64,
    /// Probability that a step attempt fails.
    pub step_failure_prob: f64,
    /// A step's time is its predicted time × this.
    #[serde(default = "one")]
    pub step_time_scale: f64,
    /// δ per trace template name, ns.
    pub delta_ns: BTreeMap<String, f64>,
    /// Latency model per bitstream name, as the paper's reading measures it.
    pub programs: BTreeMap<String, ProgramModel>,
    /// The packet-dependent part's spread about each mode's median, × that of `programs`.
    #[serde(default = "one")]
    pub packet_scale: f64,
    /// Line rate the sender sends a burst's probes back to back at, Gb/s.
    pub line_gbps: f64,
    /// Whether the sender sends a run's `burst` probes back to back (false: it paces every probe
    /// evenly whatever it is asked, a sender the run checks must catch).
    pub sender_bursts: bool,
    /// Relative frequency of each mode at a bring-up, per bitstream name (one weight per mode).
    #[serde(default)]
    pub mode_weights: BTreeMap<String, Vec<f64>>,
    /// Service rate of the pipeline path per bitstream name, packets per second (absent:
    /// unlimited).
    #[serde(default)]
    pub capacity_pps: BTreeMap<String, f64>,
    /// Latency added per byte of the entering frame, per bitstream name, ns (absent: 0).
    #[serde(default)]
    pub ns_per_byte: BTreeMap<String, f64>,
    /// `sender: agent`: the echo's way back, from the receiver's stamp of the pipeline copy to the
    /// originator's stamp of the echo (reflector turnaround, return link, the originator's NIC),
    /// ns; each stamp also has its poll phase.
    #[serde(default = "default_echo_return_ns")]
    pub echo_return_ns: f64,
    /// The bring-up steps after which a session lands in a new reset mode: every step that
    /// configures the FPGA (a boot from flash, a JTAG load), the flash's write with its boot.
    #[serde(default = "default_mode_redrawn_by")]
    pub mode_redrawn_by: Vec<Action>,
    /// How long each step takes on the twin, seconds (absent: its predicted time), × `step_time_scale`.
    #[serde(default)]
    pub step_s: BTreeMap<Action, f64>,
}

fn default_mode_redrawn_by() -> Vec<Action> {
    vec![Action::Flash, Action::Boot, Action::FlashJtag]
}

fn default_echo_return_ns() -> f64 {
    1500.0
}

fn default_wander_period() -> f64 {
    150.0
}

impl Default for SimModel {
    fn default() -> Self {
        let programs = [
            ("five_tuple", vec![[92.0, 101.0, 107.0, 112.0, 120.0, 127.0], [124.0, 131.0, 137.0, 143.0, 152.0, 159.0]]),
            ("forward", vec![[138.0, 145.0, 149.0, 154.0, 163.0, 169.0]]),
            ("remove_header", vec![[157.0, 171.0, 177.0, 181.0, 188.0, 192.0]]),
            ("checksum", vec![[349.0, 358.0, 364.0, 370.0, 377.0, 381.0]]),
        ]
        .into_iter()
        .map(|(k, modes)| (k.to_string(), ProgramModel { modes }))
        .collect();
        let delta_ns = [("forward", 17.0), ("five_tuple", 14.0), ("remove_header", 28.0), ("checksum", 24.0)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        let capacity_pps = [("forward", 20e6), ("five_tuple", 15e6), ("remove_header", 20e6), ("checksum", 10e6)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        SimModel {
            mode_redrawn_by: default_mode_redrawn_by(),
            step_s: BTreeMap::new(),
            ns_per_byte: [("int_transit".to_string(), 0.0625)].into(),
            echo_return_ns: default_echo_return_ns(),
            line_gbps: 100.0,
            sender_bursts: true,
            mode_weights: BTreeMap::new(),
            capacity_pps,
            tsc_hz: 2.89e9,
            poll_phase_ns: 6.0,
            dma_jitter_ns: 10.0,
            wander_ns: 8.0,
            wander_period_probes: default_wander_period(),
            outlier_prob: 2e-4,
            outlier_ns: [100.0, 800.0],
            first_probe_ns: [20.0, 60.0],
            loss: 0.0,
            nic_drop_prob: 0.0,
            session_delta_spread_ns: 0.4,
            session_shift_ns: 1.0,
            null_session_sd_ns: 1.5,
            null_run_sd_ns: 5.0,
            pacing_jitter_ns: 2000.0,
            pacing_error: 0.0,
            reflect_channel_ns: 4.0,
            mode_change_prob: 0.5,
            step_failure_prob: 0.0,
            step_time_scale: 1.0,
            delta_ns,
            programs,
            packet_scale: 0.6,
        }
    }
}

impl SimModel {
    /// The queueing delay of the `k`-th probe (from 0) of a run at `pps` through `bitstream`'s
    /// pipeline, ns (see the module's documentation).
    pub fn queue_wait_ns(&self, bitstream: &str, pps: f64, k: u64) -> f64 {
        let Some(&mu) = self.capacity_pps.get(bitstream) else { return 0.0 };
        let rho = pps / mu;
        if rho < 1.0 { 1e9 * rho / (2.0 * mu * (1.0 - rho)) } else { 1e9 * k as f64 * (1.0 / mu - 1.0 / pps) }
    }

    /// The extra wait of the `position`-th probe (from 0) of a burst whose probes arrive every
    /// `wire_ns`: each waits for the ones before it to be served, ns.
    pub fn burst_wait_ns(&self, bitstream: &str, position: u64, wire_ns: f64) -> f64 {
        self.capacity_pps.get(bitstream).map_or(0.0, |mu| position as f64 * (1e9 / mu - wire_ns).max(0.0))
    }

    /// The latency a frame of `len` bytes adds in `bitstream`'s pipeline for its length, ns.
    pub fn length_ns(&self, bitstream: &str, len: u32) -> f64 {
        self.ns_per_byte.get(bitstream).map_or(0.0, |k| k * f64::from(len))
    }

    /// δ of a trace template (20 ns when not listed).
    pub fn delta(&self, template: &str) -> f64 {
        self.delta_ns.get(template).copied().unwrap_or(20.0)
    }

    /// The model of a bitstream's packet-dependent latency: its table entry narrowed by
    /// `packet_scale`, or one mode centred at 68 % of the vendor bound (`period_ns` ×
    /// `bound_cycles`), or zero latency for a null bitstream.
    pub fn program(&self, name: &str, null: bool, bound_cycles: Option<u32>, period_ns: f64) -> ProgramModel {
        if null {
            return ProgramModel { modes: vec![[0.0; 6]] };
        }
        if let Some(m) = self.programs.get(name) {
            return m.narrowed(self.packet_scale);
        }
        let c = 0.68 * f64::from(bound_cycles.unwrap_or(50)) * period_ns;
        ProgramModel { modes: vec![[0.93 * c, 0.97 * c, c, 1.03 * c, 1.09 * c, 1.13 * c]] }
    }
}

/// The default of `step_time_scale` in a serialised model.
fn one() -> f64 {
    1.0
}

/// Decode overrides of the defaults from a model file.
pub fn decode(d: &mut Decoder, root: &Node) -> Option<SimModel> {
    let mut out = SimModel::default();
    let mut m = d.map(root, "simulator model")?;
    let within = |d: &mut Decoder, m: &mut latency_plan::yaml::MapReader<'_>, key: &str, target: &mut f64, range| {
        if let Some(v) = m.get(d, key).and_then(|v| d.number(v, range)) {
            *target = v;
        }
    };
    let num = |d: &mut Decoder, m: &mut latency_plan::yaml::MapReader<'_>, key: &str, target: &mut f64, max: f64| {
        within(d, m, key, target, 0.0..=max);
    };
    // Rates divide: a zero TSC rate would make every latency NaN, a zero line rate every burst
    // gap zero. Each must be a physically possible rate.
    within(d, &mut m, "tsc_hz", &mut out.tsc_hz, 1e6..=1e11);
    num(d, &mut m, "poll_phase_ns", &mut out.poll_phase_ns, 1e6);
    num(d, &mut m, "dma_jitter_ns", &mut out.dma_jitter_ns, 1e6);
    num(d, &mut m, "wander_ns", &mut out.wander_ns, 1e6);
    within(d, &mut m, "wander_period_probes", &mut out.wander_period_probes, 1.0..=1e9);
    num(d, &mut m, "session_shift_ns", &mut out.session_shift_ns, 1e6);
    num(d, &mut m, "null_session_sd_ns", &mut out.null_session_sd_ns, 1e6);
    num(d, &mut m, "null_run_sd_ns", &mut out.null_run_sd_ns, 1e6);
    num(d, &mut m, "packet_scale", &mut out.packet_scale, 10.0);
    num(d, &mut m, "outlier_prob", &mut out.outlier_prob, 1.0);
    num(d, &mut m, "loss", &mut out.loss, 1.0);
    num(d, &mut m, "nic_drop_prob", &mut out.nic_drop_prob, 1.0);
    num(d, &mut m, "session_delta_spread_ns", &mut out.session_delta_spread_ns, 1e6);
    num(d, &mut m, "pacing_jitter_ns", &mut out.pacing_jitter_ns, 1e9);
    num(d, &mut m, "reflect_channel_ns", &mut out.reflect_channel_ns, 1e6);
    if let Some(v) = m.get(d, "pacing_error").and_then(|v| d.number(v, -0.9..=10.0)) {
        out.pacing_error = v;
    }
    num(d, &mut m, "mode_change_prob", &mut out.mode_change_prob, 1.0);
    within(d, &mut m, "line_gbps", &mut out.line_gbps, 1e-3..=1e4);
    if let Some(v) = m.get(d, "sender_bursts").and_then(|v| d.boolean(v)) {
        out.sender_bursts = v;
    }
    num(d, &mut m, "step_failure_prob", &mut out.step_failure_prob, 1.0);
    num(d, &mut m, "step_time_scale", &mut out.step_time_scale, 1e3);
    for (key, target) in [("outlier_ns", &mut out.outlier_ns), ("first_probe_ns", &mut out.first_probe_ns)] {
        if let Some(v) = m.get(d, key) {
            if let Some(pair) = number_list(d, v).filter(|l| l.len() == 2 && l[0] <= l[1]) {
                *target = [pair[0], pair[1]];
            } else {
                d.error(v.pos, format!("`{key}` must be [low, high]"));
            }
        }
    }
    if let Some(v) = m.get(d, "delta_ns")
        && let Some(mut dm) = d.map(v, "δ per trace template")
    {
        for (k, x) in dm.names(d) {
            if let Some(x) = d.number(x, -1e6..=1e6) {
                out.delta_ns.insert(k.to_string(), x);
            }
        }
    }
    for (key, what, map, range) in [
        ("capacity_pps", "service rate per bitstream", &mut out.capacity_pps, 1.0..=1e12),
        ("ns_per_byte", "latency per byte per bitstream", &mut out.ns_per_byte, 0.0..=1e3),
    ] {
        if let Some(v) = m.get(d, key)
            && let Some(mut cm) = d.map(v, what)
        {
            for (k, x) in cm.names(d) {
                if let Some(x) = d.number(x, range.clone()) {
                    map.insert(k.to_string(), x);
                }
            }
        }
    }
    if let Some(v) = m.get(d, "programs")
        && let Some(mut pm) = d.map(v, "models per bitstream")
    {
        for (k, x) in pm.names(d) {
            if let Some(modes) = decode_modes(d, x) {
                out.programs.insert(k.to_string(), ProgramModel { modes });
            }
        }
    }
    if let Some(v) = m.get(d, "mode_weights")
        && let Some(mut wm) = d.map(v, "mode weights per bitstream")
    {
        for (k, x) in wm.names(d) {
            if let Some(w) = number_list(d, x).filter(|w| !w.is_empty() && w.iter().all(|&p| p >= 0.0)) {
                let modes = out.programs.get(k).map_or(1, |p| p.modes.len());
                if w.len() == modes && w.iter().sum::<f64>() > 0.0 {
                    out.mode_weights.insert(k.to_string(), w);
                    continue;
                }
                d.error(x.pos, format!("`{k}` has {modes} mode(s): give one weight ≥ 0 for each, not all 0"));
            }
        }
    }
    if let Some(v) = m.get(d, "mode_redrawn_by") {
        let names: Vec<(&str, Action)> =
            latency_plan::inventory::BRING_UP_ACTIONS.iter().map(|a| (a.name(), *a)).collect();
        if let Some(items) = d.seq(v) {
            let list: Option<Vec<Action>> = items.iter().map(|i| d.choice(i, &names)).collect();
            if let Some(list) = list {
                out.mode_redrawn_by = list;
            }
        }
    }
    if let Some(v) = m.get(d, "step_s")
        && let Some(mut sm) = d.map(v, "seconds per step")
    {
        for (k, x) in sm.names(d) {
            match Action::from_name(k) {
                Some(a) => {
                    if let Some(x) = d.number(x, 0.0..=86_400.0) {
                        out.step_s.insert(a, x);
                    }
                }
                None => {
                    let hint = latency_plan::yaml::closest(k, &Action::NAMES)
                        .map(|c| format!(" (did you mean `{c}`?)"))
                        .unwrap_or_default();
                    d.error(x.pos, format!("`step_s`: unknown step `{k}`{hint}"));
                }
            }
        }
    }
    m.finish(
        d,
        &[
            "mode_redrawn_by",
            "step_s",
            "tsc_hz",
            "poll_phase_ns",
            "dma_jitter_ns",
            "wander_ns",
            "wander_period_probes",
            "session_shift_ns",
            "null_session_sd_ns",
            "null_run_sd_ns",
            "packet_scale",
            "outlier_prob",
            "outlier_ns",
            "first_probe_ns",
            "loss",
            "nic_drop_prob",
            "session_delta_spread_ns",
            "pacing_jitter_ns",
            "pacing_error",
            "reflect_channel_ns",
            "mode_change_prob",
            "step_failure_prob",
            "step_time_scale",
            "delta_ns",
            "programs",
            "mode_weights",
            "capacity_pps",
            "ns_per_byte",
            "line_gbps",
            "sender_bursts",
        ],
    );
    Some(out)
}

fn number_list(d: &mut Decoder, n: &Node) -> Option<Vec<f64>> {
    let items = d.seq(n)?;
    items.iter().map(|i| d.number(i, -1e9..=1e9)).collect::<Vec<_>>().into_iter().collect()
}

fn decode_modes(d: &mut Decoder, n: &Node) -> Option<Vec<[f64; 6]>> {
    let items = d.seq(n)?;
    let mut modes = Vec::new();
    for item in items {
        let q = number_list(d, item)?;
        if q.len() != 6 || q.windows(2).any(|w| w[0] > w[1]) {
            d.error(item.pos, "a mode is 6 increasing quantiles: [p5, p25, p50, p75, p95, p99]");
            return None;
        }
        modes.push([q[0], q[1], q[2], q[3], q[4], q[5]]);
    }
    if modes.is_empty() {
        d.error(n.pos, "at least one mode is needed");
        return None;
    }
    Some(modes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inverse_cdf_passes_through_the_quantiles() {
        let m = SimModel::default().programs["forward"].clone();
        for (level, q) in LEVELS.iter().zip(m.modes[0]) {
            assert!((m.inverse_cdf(0, level / 100.0) - q).abs() < 1e-9);
        }
        assert_eq!(m.inverse_cdf(0, 0.0), 138.0 - 3.5);
        assert_eq!(m.inverse_cdf(0, 1.0), 169.0 + 3.0);
        // Halfway between p25 (145) and p50 (149).
        assert!((m.inverse_cdf(0, 0.375) - 147.0).abs() < 1e-9);
    }

    #[test]
    fn the_packet_part_is_the_table_narrowed_about_each_modes_median() {
        let model = SimModel::default();
        let ft = model.program("five_tuple", false, None, 4.0);
        // 107 + 0.6 × (q − 107) for the paper's low mode; medians unchanged.
        for (got, want) in ft.modes[0].iter().zip([98.0, 103.4, 107.0, 110.0, 114.8, 119.0]) {
            assert!((got - want).abs() < 1e-9, "{:?}", ft.modes[0]);
        }
        assert_eq!(ft.modes[1][2], 137.0);
        let table = SimModel { packet_scale: 1.0, ..SimModel::default() }.program("forward", false, None, 4.0);
        assert_eq!(table.modes[0], [138.0, 145.0, 149.0, 154.0, 163.0, 169.0]);
    }

    #[test]
    fn the_old_twin_is_a_model_file_of_the_new_keys() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testbeds/sim/calibration/old-twin.yaml");
        let mut diags = Vec::new();
        let m = latency_plan::load_file(&path, &mut diags, decode).unwrap_or_else(|| panic!("{diags:?}"));
        let want = SimModel {
            dma_jitter_ns: 2.0,
            wander_ns: 0.0,
            session_shift_ns: 0.0,
            null_session_sd_ns: 0.0,
            null_run_sd_ns: 0.0,
            packet_scale: 1.0,
            delta_ns: [("forward", 24.0), ("five_tuple", 18.0), ("remove_header", 28.0), ("checksum", 14.0)]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
            ..SimModel::default()
        };
        assert_eq!(m, want);
        // A provenance written before these keys existed reads as the old twin's terms.
        let mut old = serde_json::to_value(SimModel::default()).unwrap();
        for key in [
            "wander_ns",
            "wander_period_probes",
            "session_shift_ns",
            "null_session_sd_ns",
            "null_run_sd_ns",
            "packet_scale",
        ] {
            old.as_object_mut().unwrap().remove(key);
        }
        let read: SimModel = serde_json::from_value(old).unwrap();
        assert_eq!(
            (read.wander_ns, read.session_shift_ns, read.null_session_sd_ns, read.null_run_sd_ns),
            (0.0, 0.0, 0.0, 0.0)
        );
        assert_eq!((read.wander_period_probes, read.packet_scale), (150.0, 1.0));
    }

    #[test]
    fn unknown_programs_scale_with_the_vendor_bound() {
        let m = SimModel::default().program("custom", false, Some(100), 4.0);
        assert!((m.median(0) - 272.0).abs() < 1e-9);
        assert_eq!(SimModel::default().program("x", true, None, 4.0).median(0), 0.0);
    }
}
