//! The forwarding loop: switch link A → program + delay → host link P (pipeline), switch link B →
//! host link B unchanged (bypass), flashing on command.
//!
//! One thread does everything, so the two copies of a probe are seen in the same loop pass and the
//! pipeline copy's delay starts when its bypass twin leaves. Frames wait in a FIFO (a constant delay
//! keeps their order). The loop sleeps in short steps while idle and spins for the last stretch
//! before a frame is due, so that the emulated delay is precise to a few µs rather than to the
//! timer's granularity.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::io;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use latency_proto::probe::{self, ProbeFormat};
use latency_proto::{CardIdentity, Hex32};
use latency_sys::af_packet::PacketRing;

use crate::bitstream::{self, Bitstream};
use crate::packet::Verdict;
use crate::state::{self, Counters, FakeBar, Phase, State};

/// Frames taken from a ring per loop pass.
const BUDGET: usize = 64;
/// Time without frames after which the loop sleeps [`Config::idle_poll`] instead of
/// [`Config::poll`].
pub const IDLE_AFTER: Duration = Duration::from_millis(20);
/// How often the counters are written to the state file.
const STATE_EVERY: Duration = Duration::from_secs(1);

/// The emulator's settings.
#[derive(Clone, Debug)]
pub struct Config {
    /// Switch-facing link of the pipeline copy (A).
    pub switch_a: String,
    /// Switch-facing link of the bypass copy (B).
    pub switch_b: String,
    /// Host-facing link of the pipeline (P).
    pub host_p: String,
    /// Host-facing link of the bypass (B).
    pub host_b: String,
    /// Folder of the state file, control FIFO, fake BAR and pid file.
    pub dir: PathBuf,
    /// Bitstream loaded at start.
    pub bitstream: Bitstream,
    /// Delay given on the command line (kept across resets).
    pub delay_override: Option<Duration>,
    /// How long a flash keeps the host-facing links down.
    pub flash_down: Duration,
    /// The board the card says it is (its management firmware's profile).
    pub profile: String,
    /// Longest sleep of the loop while frames flow.
    pub poll: Duration,
    /// Sleep of the loop once no frame has come for [`IDLE_AFTER`] (keeps an idle emulator cheap;
    /// both copies of the first probe wait alike, so the differential is unaffected).
    pub idle_poll: Duration,
    /// How long before a frame is due the loop stops sleeping and spins.
    pub spin: Duration,
    /// Count each pipeline frame's delay from the moment the kernel received it, after this base
    /// latency of the card's own, instead of from the loop pass that took it: for a card fed by
    /// another card (the second hop of a path). `None`: from the pass.
    pub arrival_base: Option<Duration>,
}

/// Delays counted from each frame's arrival: for a card fed by another card (the second hop of a
/// path), whose frames come at moments of that card's making. A loop pass takes a frame up to a
/// sleep after it arrived; that wait is the same for the null image and a program's only if the
/// frames arrive at moments unrelated to this loop's sleeps. The first card sends a null image's
/// frames in its own passes, whose sleeps end in step with this card's (the same timer period), so
/// this card took them a whole sleep late, and a program's (sent at moments its delay sets) half a
/// sleep late on average: the second hop read 27 µs of 300 low. From the arrival (the kernel's
/// receive time, [`PacketRing::stamp_at_arrival`]), after a base latency longer than any such wait,
/// every frame leaves on time whatever the pass that took it; the null image's frames then take
/// the base latency, which the calibration subtracts as it does a real card's.
#[derive(Clone, Copy, Debug)]
struct Arrival {
    base: Duration,
    tsc_hz: f64,
}

impl Arrival {
    /// When a frame stamped `tsc` arrived, from a pass that read the TSC `pass_tsc` at `pass`.
    fn at(&self, pass: Instant, pass_tsc: u64, tsc: u64) -> Instant {
        let from_pass = |ticks: u64| Duration::from_secs_f64(ticks as f64 / self.tsc_hz);
        match tsc.checked_sub(pass_tsc) {
            Some(after) => pass + from_pass(after),
            None => pass.checked_sub(from_pass(pass_tsc - tsc)).unwrap_or(pass),
        }
    }
}

/// A command for the running emulator (from the control FIFO or a signal).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Control {
    /// Load a bitstream (image path, name or spec file), with an optional delay override.
    Flash {
        /// What to load.
        image: String,
        /// Delay override.
        delay: Option<Duration>,
        /// What the image is, which the card then reads back (its state's identity): the
        /// sha256 of the image file and the bitstream's USERCODE, where given.
        written: CardIdentity,
    },
    /// Flash the loaded bitstream again (a reset: links bounce, the pipeline empties).
    Reset,
    /// Write the state file now.
    Status,
    /// Exit.
    Quit,
}

/// A control line that is not a command.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadCommand {
    /// `flash`'s delay is not a number of µs.
    #[error("`{0}` is not a delay in µs")]
    Delay(String),
    /// No command of the emulator.
    #[error(
        "unknown command `{0}` (expected `flash IMAGE [DELAY_US] [sha256=HEX] [usercode=HEX]`, `reset`, `status`, \
         `quit`)"
    )]
    Unknown(String),
}

/// Parse a control line: `flash IMAGE [DELAY_US] [sha256=HEX] [usercode=HEX]`, `reset`,
/// `status`, `quit`.
pub fn parse_command(line: &str) -> Result<Control, BadCommand> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let unknown = || BadCommand::Unknown(line.to_string());
    match words.as_slice() {
        ["flash", image, rest @ ..] => {
            let (mut delay, mut written) = (None, CardIdentity::default());
            for w in rest {
                if let Some(h) = w.strip_prefix("sha256=") {
                    if written.sha256.replace(h.to_string()).is_some() {
                        return Err(unknown());
                    }
                } else if let Some(u) = w.strip_prefix("usercode=") {
                    if written.usercode.replace(Hex32::parse(u).ok_or_else(unknown)?).is_some() {
                        return Err(unknown());
                    }
                } else if delay.is_none() {
                    let us: u64 = w.parse().map_err(|_| BadCommand::Delay((*w).to_string()))?;
                    delay = Some(Duration::from_micros(us));
                } else {
                    return Err(unknown());
                }
            }
            Ok(Control::Flash { image: (*image).to_string(), delay, written })
        }
        ["reset"] => Ok(Control::Reset),
        ["status"] => Ok(Control::Status),
        ["quit"] => Ok(Control::Quit),
        _ => Err(BadCommand::Unknown(line.to_string())),
    }
}

/// Errors that stop the emulator.
#[derive(Debug, thiserror::Error)]
pub enum EmuError {
    /// A link cannot be opened.
    #[error("{link}: {source}")]
    Link {
        /// Interface.
        link: String,
        /// The error.
        source: io::Error,
    },
    /// The state folder cannot be written.
    #[error("{path}: {source}")]
    State {
        /// File or folder.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
}

struct Emu {
    cfg: Config,
    rx_a: PacketRing,
    rx_b: PacketRing,
    tx_p: PacketRing,
    tx_b: PacketRing,
    bar: FakeBar,
    bitstream: Bitstream,
    /// Delay given with the last flash command (kept across resets).
    delay_override: Option<Duration>,
    /// What the last flash command said the image is (kept across resets).
    written: CardIdentity,
    queue: VecDeque<(Instant, Vec<u8>)>,
    counters: Counters,
    generation: u64,
    last_result: String,
    flashed_at_ms: u64,
    phase: Phase,
    /// When a frame was last taken from a switch link.
    last_frame: Instant,
    /// Delays counted from each frame's arrival, if so configured.
    arrival: Option<Arrival>,
}

/// Send a frame, retrying once after `ENETDOWN`: a packet socket reports a link that went down
/// (a flash) on its next send even when the link is up again.
fn send(ring: &mut PacketRing, frame: &[u8], counters: &mut Counters) -> bool {
    let mut r = ring.send(frame);
    if matches!(&r, Err(e) if e.raw_os_error() == Some(libc::ENETDOWN)) {
        r = ring.send(frame);
    }
    if r.is_err() {
        counters.send_errors += 1;
    }
    r.is_ok()
}

fn is_probe(frame: &[u8]) -> bool {
    probe::parse(frame, ProbeFormat::Latencylab).is_some() || probe::parse(frame, ProbeFormat::Compact).is_some()
}

/// Lower this thread's timer slack (default 50 µs) so that short sleeps end on time.
fn lower_timer_slack() {
    let _ = std::fs::write("/proc/thread-self/timerslack_ns", "1000");
}

/// `ip link set DEV up|down`.
fn link_set(dev: &str, up: bool) -> Result<(), LinkError> {
    let state = if up { "up" } else { "down" };
    let failed = |why: String| LinkError { dev: dev.to_string(), state, why };
    match Command::new("ip").args(["link", "set", "dev", dev, state]).output() {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(failed(String::from_utf8_lossy(&o.stderr).trim().to_string())),
        Err(e) => Err(failed(e.to_string())),
    }
}

/// `ip link set` failed: its words, or why it could not run.
#[derive(Debug, thiserror::Error)]
#[error("ip link set {dev} {state}: {why}")]
struct LinkError {
    dev: String,
    state: &'static str,
    why: String,
}

impl Emu {
    fn write_state(&self) -> Result<(), EmuError> {
        let s = State {
            pid: std::process::id(),
            state: self.phase,
            generation: self.generation,
            last_result: self.last_result.clone(),
            bitstream: self.bitstream.clone(),
            identity: CardIdentity { profile: Some(self.cfg.profile.clone()), ..self.written.clone() },
            flashed_at_ms: self.flashed_at_ms,
            links: [&self.cfg.switch_a, &self.cfg.switch_b, &self.cfg.host_p, &self.cfg.host_b].map(String::clone),
            counters: self.counters.clone(),
        };
        state::write_state(&self.cfg.dir, &s).map_err(|source| EmuError::State { path: self.cfg.dir.clone(), source })
    }

    /// One pass: take what both switch links hold, forward due pipeline frames.
    fn pass(&mut self) {
        let now = Instant::now();
        // With delays counted from arrival, the pass's moment on the TSC too.
        let arrival = self.arrival.map(|a| (a, latency_sys::rdtsc_fenced()));
        let bitstream = &self.bitstream;
        let (queue, counters) = (&mut self.queue, &mut self.counters);
        let mut got = self.rx_a.poll(BUDGET, |frame, tsc| {
            counters.pipeline_in += 1;
            counters.probes_in[0] += u64::from(is_probe(frame));
            let start = arrival.map_or(now, |(a, now_tsc)| a.at(now, now_tsc, tsc) + a.base);
            let delay = bitstream.delay_for(frame.len());
            // A pipeline keeps frames in order: none leaves before the one ahead of it.
            let due = queue.back().map_or(start + delay, |(ahead, _)| (start + delay).max(*ahead));
            match bitstream.behaviour.apply(frame, delay) {
                Verdict::Pass(out) => queue.push_back((due, out.into_owned())),
                Verdict::Drop(reason) => {
                    *counters.pipeline_dropped.entry(Cow::Borrowed(reason.name())).or_default() += 1
                }
            }
        });
        let tx_b = &mut self.tx_b;
        got += self.rx_b.poll(BUDGET, |frame, _| {
            counters.bypass_in += 1;
            counters.probes_in[1] += u64::from(is_probe(frame));
            if send(tx_b, frame, counters) {
                counters.bypass_out += 1;
            }
        });
        let now = Instant::now();
        if got > 0 {
            self.last_frame = now;
        }
        while self.queue.front().is_some_and(|(due, _)| *due <= now) {
            if let Some((_, frame)) = self.queue.pop_front()
                && send(&mut self.tx_p, &frame, &mut self.counters)
            {
                self.counters.pipeline_out += 1;
            }
        }
    }

    /// Sleep or spin until the next pass.
    fn wait(&self) {
        match self.queue.front() {
            None if self.last_frame.elapsed() > IDLE_AFTER => std::thread::sleep(self.cfg.idle_poll),
            None => std::thread::sleep(self.cfg.poll),
            Some((due, _)) => {
                let left = due.saturating_duration_since(Instant::now());
                if left > self.cfg.spin {
                    std::thread::sleep((left - self.cfg.spin).min(self.cfg.poll));
                } else {
                    std::hint::spin_loop();
                }
            }
        }
    }

    /// Discard everything the switch links hold (links down: nothing crosses the card).
    fn discard(&mut self) {
        let lost = &mut self.counters.lost_to_flash;
        for ring in [&mut self.rx_a, &mut self.rx_b] {
            ring.poll(usize::MAX, |_, _| *lost += 1);
        }
    }

    /// Flash the loaded bitstream again (its spec file, if any, is read again).
    fn reset(&mut self) -> Result<(), EmuError> {
        let image = self.bitstream.image.clone();
        self.flash(&image, self.delay_override, self.written.clone())
    }

    /// Load `image` as a re-enumeration would: links down, pipeline emptied, new program, links up.
    fn flash(&mut self, image: &str, delay: Option<Duration>, written: CardIdentity) -> Result<(), EmuError> {
        let next = match bitstream::resolve(image, delay) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("fpga-emu: flash {image}: {e}");
                self.generation += 1;
                self.last_result = e.to_string();
                return self.write_state();
            }
        };
        eprintln!("fpga-emu: flashing {} ({}, {} µs)", next.image, next.behaviour, next.delay.as_micros());
        self.phase = Phase::Flashing;
        self.write_state()?;
        let _ = self.bar.set_links_up(false);
        self.counters.lost_to_flash += self.queue.len() as u64;
        self.queue.clear();
        let mut problems: Vec<String> = Vec::new();
        for dev in [&self.cfg.host_p, &self.cfg.host_b] {
            problems.extend(link_set(dev, false).err().map(|e| e.to_string()));
        }
        let until = Instant::now() + self.cfg.flash_down;
        while Instant::now() < until {
            self.discard();
            std::thread::sleep(Duration::from_millis(1));
        }
        self.bitstream = next;
        self.delay_override = delay;
        self.written = written;
        for dev in [&self.cfg.host_p, &self.cfg.host_b] {
            problems.extend(link_set(dev, true).err().map(|e| e.to_string()));
        }
        self.discard();
        let _ = self.bar.set_links_up(true);
        self.generation += 1;
        self.flashed_at_ms = state::unix_ms();
        self.last_result = if problems.is_empty() { "ok".into() } else { problems.join("; ") };
        self.phase = Phase::Running;
        eprintln!("fpga-emu: running {} (generation {}): {}", self.bitstream.name, self.generation, self.last_result);
        self.write_state()
    }
}

/// Run the emulator until `stop` is set or a `quit` command arrives. `hup` (SIGHUP) resets the
/// card (flashes the loaded bitstream again).
pub fn run(
    cfg: Config,
    stop: &Arc<AtomicBool>,
    hup: &Arc<AtomicBool>,
    commands: &Receiver<String>,
) -> Result<(), EmuError> {
    // Promiscuous, as a card's MAC passes every frame to its pipeline whatever its destination.
    let open =
        |link: &str| PacketRing::open(link, true).map_err(|source| EmuError::Link { link: link.to_string(), source });
    let bar = FakeBar::create(&cfg.dir).map_err(|source| EmuError::State { path: cfg.dir.clone(), source })?;
    let arrival = cfg.arrival_base.map(|base| Arrival { base, tsc_hz: latency_sys::measure_tsc_hz(50_000_000) });
    let mut rx_a = open(&cfg.switch_a)?;
    if let Some(a) = arrival {
        rx_a.stamp_at_arrival(a.tsc_hz);
    }
    let mut emu = Emu {
        rx_a,
        rx_b: open(&cfg.switch_b)?,
        tx_p: open(&cfg.host_p)?,
        tx_b: open(&cfg.host_b)?,
        bar,
        bitstream: cfg.bitstream.clone(),
        delay_override: cfg.delay_override,
        written: CardIdentity::default(),
        queue: VecDeque::new(),
        counters: Counters::default(),
        generation: 0,
        last_result: "ok".into(),
        flashed_at_ms: state::unix_ms(),
        phase: Phase::Running,
        last_frame: Instant::now(),
        arrival,
        cfg,
    };
    lower_timer_slack();
    for dev in [&emu.cfg.host_p, &emu.cfg.host_b] {
        if let Err(e) = link_set(dev, true) {
            eprintln!("fpga-emu: {e}");
        }
    }
    let _ = emu.bar.set_links_up(true);
    emu.write_state()?;
    eprintln!(
        "fpga-emu: running {} ({}, {} µs): {} -> {} (pipeline), {} -> {} (bypass)",
        emu.bitstream.name,
        emu.bitstream.behaviour,
        emu.bitstream.delay.as_micros(),
        emu.cfg.switch_a,
        emu.cfg.host_p,
        emu.cfg.switch_b,
        emu.cfg.host_b
    );
    let mut last_write = Instant::now();
    let mut written = emu.counters.clone();
    while !stop.load(Ordering::Relaxed) {
        while let Ok(line) = commands.try_recv() {
            match parse_command(&line) {
                Ok(Control::Flash { image, delay, written }) => emu.flash(&image, delay, written)?,
                Ok(Control::Reset) => emu.reset()?,
                Ok(Control::Status) => emu.write_state()?,
                Ok(Control::Quit) => stop.store(true, Ordering::Relaxed),
                Err(e) => eprintln!("fpga-emu: {e}"),
            }
        }
        if hup.swap(false, Ordering::Relaxed) {
            emu.reset()?;
        }
        emu.pass();
        if last_write.elapsed() >= STATE_EVERY && emu.counters != written {
            emu.write_state()?;
            written = emu.counters.clone();
            last_write = Instant::now();
        }
        emu.wait();
    }
    emu.phase = Phase::Stopped;
    let _ = emu.bar.set_links_up(false);
    emu.write_state()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_arrival_is_the_pass_moved_by_the_stamps_distance_at_the_tsc_rate() {
        let a = Arrival { base: Duration::ZERO, tsc_hz: 2.5e9 };
        let pass = Instant::now();
        // 2,500 ticks at 2.5 GHz are 1 µs.
        assert_eq!(a.at(pass, 10_000, 12_500), pass + Duration::from_micros(1));
        assert_eq!(a.at(pass, 10_000, 10_000), pass);
        assert_eq!(a.at(pass, 1_000_000, 750_000), pass - Duration::from_micros(100));
    }

    #[test]
    fn control_lines_parse() {
        let flash = |image: &str, us: Option<u64>, sha256: Option<&str>, usercode: Option<u32>| {
            Ok(Control::Flash {
                image: image.into(),
                delay: us.map(Duration::from_micros),
                written: CardIdentity {
                    sha256: sha256.map(String::from),
                    usercode: usercode.map(Hex32),
                    ..CardIdentity::default()
                },
            })
        };
        assert_eq!(parse_command("flash /var/tmp/x/rmvhdr.mcs"), flash("/var/tmp/x/rmvhdr.mcs", None, None, None));
        assert_eq!(parse_command("  flash forward 350 "), flash("forward", Some(350), None, None));
        assert_eq!(parse_command("flash forward.mcs sha256=de45"), flash("forward.mcs", None, Some("de45"), None));
        assert_eq!(
            parse_command("flash forward.mcs 350 sha256=de45 usercode=0xA5A50001"),
            flash("forward.mcs", Some(350), Some("de45"), Some(0xa5a5_0001))
        );
        assert!(parse_command("flash forward.mcs usercode=0xZZ").is_err());
        assert!(parse_command("flash forward.mcs usercode=1 usercode=2").is_err());
        assert!(parse_command("flash forward.mcs 350 400").is_err());
        assert!(parse_command("flash forward.mcs sha256=a sha256=b").is_err());
        assert_eq!(parse_command("reset"), Ok(Control::Reset));
        assert_eq!(parse_command("quit"), Ok(Control::Quit));
        assert_eq!(parse_command("status"), Ok(Control::Status));
        assert!(parse_command("flash").is_err());
        assert!(parse_command("flash x y").is_err());
        assert!(parse_command("boot").is_err());
    }
}
