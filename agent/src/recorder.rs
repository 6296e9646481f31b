//! The capture pipeline: one busy-polling thread per port (pinned to its core) parses probe ids
//! and hands batches to a writer thread through a bounded queue — a full queue drops the batch and
//! counts it, it never blocks a poller. The writer appends the records of the current run to an
//! Arrow IPC stream (`run=<r>.arrows`), flushed per batch so that a crash keeps what was written.
//! Runs are started and ended by the controller, not by time gaps.
//!
//! A run ends by a handshake with the pollers rather than at a moment in time: the controller
//! publishes the run the pollers record into together with a generation number, and each poller,
//! when it sees a new generation, first hands over the batch it holds under the previous run,
//! then acknowledges. A run is closed only once every poller has acknowledged its end, so every
//! probe a poller dequeued before it saw the end is in the run — even when that poller was
//! descheduled meanwhile. Symmetrically, a poll under way when a run starts counts into the run.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufWriter};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use arrow_ipc::writer::StreamWriter;
use latency_proto::control::RunCounters;
use latency_proto::probe::{self, ProbeFormat};
use latency_proto::schema::{Port, RecordBuilder, record_schema};

use crate::capture::RxPort;

mod soak;
pub use soak::{PAIRING_SLOTS, Pairer, SoakOptions, SoakRun};

/// Most ports one capture polls (the probe's ports are kept as bits of a u16).
pub const MAX_PORTS: usize = 16;

/// Records per message from a poller to the writer.
pub const POLLER_BATCH: usize = 256;
/// Records per Arrow batch written (and flushed).
const WRITE_BATCH: usize = 4096;
/// How long a change of run waits for the pollers' acknowledgements. Pollers busy-poll and look
/// at the run before every poll, so only a poller that is not running (or stuck in its driver)
/// takes more than microseconds.
pub const ACK_TIMEOUT: Duration = Duration::from_secs(2);

/// Settings of a capture.
#[derive(Clone, Debug)]
pub struct Options {
    /// Probe id format.
    pub format: ProbeFormat,
    /// Core of each port's poller (same order as the ports), if pinned.
    pub cores: Vec<usize>,
    /// Folder of the run files.
    pub out: PathBuf,
    /// Capacity of the poller → writer queue, in messages of up to [`POLLER_BATCH`] records.
    pub queue: usize,
    /// Core the writer thread is pinned to, if any (away from the pollers' cores).
    pub service_core: Option<usize>,
    /// Soak mode: a histogram of the differentials per run, appended to its log every interval.
    pub soak: Option<SoakOptions>,
    /// Pollers without a core (ports beyond `cores`) sleep in the kernel while their port is
    /// idle ([`RxPort::wait`]) instead of spinning, and their ports stamp frames with the moment
    /// the kernel received them where they can ([`RxPort::stamp_at_arrival`]).
    pub sleep_unpinned: bool,
    /// The TSC's rate in Hz.
    pub tsc_hz: f64,
}

/// One probe copy as seen by a poller.
#[derive(Clone, Copy, Debug)]
pub struct Seen {
    /// Probe id.
    pub id: u64,
    /// TSC stamp.
    pub tsc: u64,
    /// Frame length.
    pub len: u16,
}

enum Msg {
    Begin(u32, mpsc::Sender<io::Result<PathBuf>>),
    End(u32, mpsc::Sender<io::Result<RunCounters>>),
    /// Copies of port `port` (0 pipeline, 1 bypass, 2… further ports).
    Batch {
        port: u8,
        run: u32,
        seen: Vec<Seen>,
    },
}

/// The pollers' setting, one word so that a single load sees all of it: a generation counting
/// the changes (bits 33–63), whether a run is open (bit 32), and the run (bits 0–31: the open
/// run, or the last one when none is open).
#[derive(Clone, Copy, PartialEq, Eq)]
struct Setting(u64);

impl Setting {
    const OPEN: u64 = 1 << 32;

    fn new(generation: u32, run: u32, open: bool) -> Setting {
        Setting(u64::from(generation) << 33 | if open { Setting::OPEN } else { 0 } | u64::from(run))
    }

    fn generation(self) -> u32 {
        (self.0 >> 33) as u32
    }

    fn run(self) -> u32 {
        self.0 as u32
    }

    fn open(self) -> bool {
        self.0 & Setting::OPEN != 0
    }

    /// The run records go to: the open run, or 0 (outside any run).
    fn recording(self) -> u32 {
        if self.open() { self.run() } else { 0 }
    }

    /// The next setting.
    fn next(self, run: u32, open: bool) -> Setting {
        Setting::new(self.generation().wrapping_add(1), run, open)
    }
}

/// Poller `poller` has handed over everything it dequeued before it saw generation `generation`.
struct Ack {
    poller: usize,
    generation: u32,
}

#[derive(Default)]
struct Shared {
    stop: AtomicBool,
    setting: AtomicU64,
    non_probe: AtomicU64,
    dropped: AtomicU64,
    outside: AtomicU64,
    loops: AtomicU64,
    /// Frames the NICs or rings dropped while a run was open, and while none was.
    nic_drops: AtomicU64,
    nic_drops_outside: AtomicU64,
    errors: Mutex<Vec<String>>,
}

impl Shared {
    fn error(&self, e: String) {
        self.errors.lock().unwrap_or_else(|p| p.into_inner()).push(e);
    }

    fn totals(&self) -> Totals {
        Totals {
            non_probe: self.non_probe.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
            outside: self.outside.load(Ordering::Relaxed),
            loops: self.loops.load(Ordering::Relaxed),
            nic_drops: self.nic_drops.load(Ordering::Relaxed),
        }
    }
}

/// The capture-wide counters at one moment.
#[derive(Clone, Copy, Default)]
struct Totals {
    non_probe: u64,
    dropped: u64,
    outside: u64,
    loops: u64,
    nic_drops: u64,
}

/// A running capture.
pub struct Recorder {
    shared: Arc<Shared>,
    tx: SyncSender<Msg>,
    threads: Vec<JoinHandle<()>>,
    acks: Receiver<Ack>,
    /// Port name of each poller, in poller order.
    pollers: Vec<String>,
    /// The last setting published.
    setting: Setting,
    /// The counters when the current run started (non-probe, dropped, loops).
    base: Totals,
    /// Outside count when the last run ended (or at start).
    outside_mark: u64,
}

impl Recorder {
    /// Start one poller per port and the writer.
    pub fn start(ports: Vec<Box<dyn RxPort>>, opts: Options) -> io::Result<Recorder> {
        std::fs::create_dir_all(&opts.out)?;
        let shared = Arc::new(Shared::default());
        let (tx, rx) = mpsc::sync_channel::<Msg>(opts.queue.max(1));
        let (ack_tx, acks) = mpsc::channel::<Ack>();
        let mut threads = Vec::new();
        let (out, service_core, soak) = (opts.out.clone(), opts.service_core, opts.soak);
        let count = ports.len();
        if count > MAX_PORTS || (soak.is_some() && count != 2) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{count} ports: a capture takes at most {MAX_PORTS}, and soak mode exactly two"),
            ));
        }
        let writer_shared = shared.clone();
        threads.push(std::thread::Builder::new().name("writer".into()).spawn(move || {
            if let Some(c) = service_core
                && let Err(e) = pin(c)
            {
                writer_shared.error(format!("writer: cannot pin to core {c}: {e}"));
            }
            writer(rx, &out, soak, count, &writer_shared)
        })?);
        let pollers: Vec<String> = ports.iter().map(|p| p.name()).collect();
        for (i, mut port) in ports.into_iter().enumerate() {
            let which = i as u8;
            let (shared, tx, ack) = (shared.clone(), tx.clone(), ack_tx.clone());
            let (format, core) = (opts.format, opts.cores.get(i).copied());
            let wait = opts.sleep_unpinned && core.is_none();
            if wait {
                port.stamp_at_arrival(opts.tsc_hz);
            }
            threads.push(
                std::thread::Builder::new()
                    .name(format!("poll-{}", pollers[i]))
                    .spawn(move || poller(port, Poller { index: i, which, core, format, wait }, &shared, &tx, &ack))?,
            );
        }
        let setting = Setting::new(0, 0, false);
        Ok(Recorder { shared, tx, threads, acks, pollers, setting, base: Totals::default(), outside_mark: 0 })
    }

    /// Open run `run`: records from now on go to its file. A run still open is closed first
    /// (without a report). Does not wait for the pollers: a poll that overlaps the start of a run
    /// counts into it, as some drivers wait in their receive call (`net_pcap` reading a pipe).
    pub fn begin(&mut self, run: u32) -> io::Result<PathBuf> {
        if run == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "runs are numbered from 1"));
        }
        if self.setting.open() {
            self.end_for_pollers();
        }
        let (reply, answer) = mpsc::channel();
        self.tx.send(Msg::Begin(run, reply)).map_err(|_| io::Error::other("writer stopped"))?;
        let file = answer.recv().map_err(|_| io::Error::other("writer stopped"))??;
        self.publish(self.setting.next(run, true));
        self.base = self.shared.totals();
        Ok(file)
    }

    /// Close run `run` and return its counters, once every poller has handed over what it
    /// dequeued before it saw the end. Probes dequeued while no run was open since the previous
    /// run ended are reported as this run's `outside_run`.
    pub fn end(&mut self, run: u32) -> io::Result<RunCounters> {
        if run == 0 || self.setting.recording() != run {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("run {run} is not open")));
        }
        self.end_for_pollers();
        let now = self.shared.totals();
        let outside_run = now.outside - std::mem::replace(&mut self.outside_mark, now.outside);
        let (reply, answer) = mpsc::channel();
        self.tx.send(Msg::End(run, reply)).map_err(|_| io::Error::other("writer stopped"))?;
        let c = answer.recv().map_err(|_| io::Error::other("writer stopped"))??;
        Ok(RunCounters {
            non_probe: now.non_probe - self.base.non_probe,
            dropped: now.dropped - self.base.dropped,
            reflected_loops: now.loops - self.base.loops,
            nic_drops: now.nic_drops - self.base.nic_drops,
            outside_run,
            ..c
        })
    }

    fn publish(&mut self, setting: Setting) {
        self.setting = setting;
        self.shared.setting.store(setting.0, Ordering::SeqCst);
    }

    /// End the open run for the pollers and wait until each has acknowledged, having handed over
    /// what it held for the run (batches are queued before the acknowledgement, so they reach
    /// the writer before anything sent after this returns). A poller that does not acknowledge
    /// within [`ACK_TIMEOUT`] is reported in [`Recorder::errors`].
    fn end_for_pollers(&mut self) {
        let run = self.setting.run();
        self.publish(self.setting.next(run, false));
        let mut pending = vec![true; self.pollers.len()];
        let mut left = pending.len();
        let deadline = Instant::now() + ACK_TIMEOUT;
        while left > 0 {
            match self.acks.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(Ack { poller, generation }) if generation == self.setting.generation() => {
                    if let Some(p) = pending.get_mut(poller).filter(|p| **p) {
                        *p = false;
                        left -= 1;
                    }
                }
                // The acknowledgement of an earlier change.
                Ok(_) => {}
                Err(_) => break,
            }
        }
        for (name, _) in self.pollers.iter().zip(&pending).filter(|(_, p)| **p) {
            self.shared.error(format!(
                "{name}: no acknowledgement within {} s of the end of run {run}: the records it held count as \
                 outside the run",
                ACK_TIMEOUT.as_secs()
            ));
        }
    }

    /// Errors the threads ran into since the last call (e.g. a run file that could not be
    /// written); each is returned once.
    pub fn errors(&self) -> Vec<String> {
        std::mem::take(&mut *self.shared.errors.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Stop the pollers and the writer (an open run file is finished, with what the pollers
    /// held) and release the ports.
    pub fn stop(self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        drop(self.tx);
        for t in self.threads {
            let _ = t.join();
        }
    }
}

/// What a poller thread is.
struct Poller {
    index: usize,
    which: u8,
    core: Option<usize>,
    format: ProbeFormat,
    /// Sleep while the port is idle (at most 1 ms at a time, so that run changes are seen).
    wait: bool,
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn pin(core: usize) -> io::Result<()> {
    latency_sys::pin_current_thread(core)
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
fn pin(_: usize) -> io::Result<()> {
    Err(io::Error::new(io::ErrorKind::Unsupported, "pinning is implemented for x86_64 Linux only"))
}

fn poller(mut port: Box<dyn RxPort>, me: Poller, shared: &Shared, tx: &SyncSender<Msg>, acks: &Sender<Ack>) {
    if let Some(c) = me.core
        && let Err(e) = pin(c)
    {
        shared.error(format!("{}: cannot pin to core {c}: {e}", port.name()));
    }
    let mut seen: Vec<Seen> = Vec::with_capacity(POLLER_BATCH);
    let (mut non_probe, mut loops) = (0u64, 0u64);
    // Generation 0 is the setting before the first change, so a change made before this thread
    // started is acknowledged too.
    let mut setting = Setting::new(0, 0, false);
    while !shared.stop.load(Ordering::Relaxed) {
        let now = Setting(shared.setting.load(Ordering::Acquire));
        if now != setting {
            // The port's drops since the last change happened under the setting it leaves.
            let counter = if setting.open() { &shared.nic_drops } else { &shared.nic_drops_outside };
            counter.fetch_add(port.drops(), Ordering::Relaxed);
            hand_over(&mut seen, setting.recording(), me.which, shared, tx);
            setting = now;
            let _ = acks.send(Ack { poller: me.index, generation: now.generation() });
        }
        let held = seen.len();
        let n = port.poll(POLLER_BATCH - held, &mut |frame, tsc| match probe::parse(frame, me.format) {
            Some(p) if p.tag.is_none() => {
                seen.push(Seen { id: p.id, tsc, len: frame.len().min(u16::MAX as usize) as u16 })
            }
            // A tagged probe is a reflection of this agent looping back: recording it would
            // count its probe twice (the backends do not reflect it again either).
            Some(_) => loops += 1,
            None => non_probe += 1,
        });
        if non_probe > 0 {
            shared.non_probe.fetch_add(non_probe, Ordering::Relaxed);
            non_probe = 0;
        }
        if loops > 0 {
            shared.loops.fetch_add(loops, Ordering::Relaxed);
            loops = 0;
        }
        // A poll that overlaps the start of a run counts into it: a driver may wait in its receive
        // call (`net_pcap` reading a pipe) across `begin`. At most one run can have started (the
        // end of a run waits for this poller), and its number stays in the setting even once its
        // end is published; it is still open for the writer. What was held from before the poll
        // is outside.
        if n > 0 && !setting.open() {
            let now = Setting(shared.setting.load(Ordering::Acquire));
            if now.generation() != setting.generation() {
                shared.outside.fetch_add(held as u64, Ordering::Relaxed);
                seen.drain(..held);
                hand_over(&mut seen, now.run(), me.which, shared, tx);
            }
        }
        if !seen.is_empty() && (n == 0 || seen.len() >= POLLER_BATCH) {
            hand_over(&mut seen, setting.recording(), me.which, shared, tx);
        }
        if n == 0 {
            port.idle(me.wait);
        }
    }
    hand_over(&mut seen, setting.recording(), me.which, shared, tx);
}

/// Queue the records of `seen` for run `run` (none: they count as outside a run). Never blocks:
/// when the queue is full they are dropped and counted.
fn hand_over(seen: &mut Vec<Seen>, run: u32, port: u8, shared: &Shared, tx: &SyncSender<Msg>) {
    if seen.is_empty() {
        return;
    }
    if run == 0 {
        shared.outside.fetch_add(seen.len() as u64, Ordering::Relaxed);
        seen.clear();
        return;
    }
    let batch = std::mem::replace(seen, Vec::with_capacity(POLLER_BATCH));
    if let Err(TrySendError::Full(Msg::Batch { seen, .. })) = tx.try_send(Msg::Batch { port, run, seen: batch }) {
        shared.dropped.fetch_add(seen.len() as u64, Ordering::Relaxed);
    }
}

/// The open run of the writer.
struct OpenRun {
    run: u32,
    file: PathBuf,
    stream: StreamWriter<BufWriter<File>>,
    builder: RecordBuilder,
    /// Records so far per port.
    seq: Vec<u64>,
    /// The ports each probe was seen on, as bits.
    ports: HashMap<u64, u16>,
    records: u64,
    /// Soak mode: the pairing and the histogram log.
    soak: Option<SoakRun>,
    /// Whether records are written (always, unless soak mode leaves them out).
    keep_records: bool,
}

impl OpenRun {
    fn flush(&mut self) -> io::Result<()> {
        if self.builder.is_empty() {
            return Ok(());
        }
        let batch = self.builder.finish().map_err(io::Error::other)?;
        self.stream.write(&batch).map_err(io::Error::other)?;
        self.stream.flush().map_err(io::Error::other)
    }

    fn finish(mut self) -> io::Result<RunCounters> {
        self.flush()?;
        self.stream.finish().map_err(io::Error::other)?;
        let inner = self.stream.into_inner().map_err(io::Error::other)?;
        inner.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        let mut c = RunCounters { run: self.run, records: self.records, file: self.file, ..Default::default() };
        match self.soak {
            Some(soak) => {
                let (log, pairer) = soak.finish()?;
                (c.pipeline_only, c.bypass_only) = pairer.one_port_only();
                c.matched = pairer.matched;
                c.histogram = Some(log);
            }
            None => {
                let all = (1u16 << self.seq.len()) - 1;
                for &mask in self.ports.values() {
                    match mask {
                        1 => c.pipeline_only += 1,
                        2 => c.bypass_only += 1,
                        m if m == all => c.matched += 1,
                        _ => c.partial += 1,
                    }
                }
                if self.seq.len() > 2 {
                    c.per_port = self.seq;
                }
            }
        }
        Ok(c)
    }
}

/// `out/name`, free: a file from an earlier attempt of the run (a retry, or a resumed study) is
/// kept aside as `name.earlier-<n>`, never overwritten.
fn fresh_file(out: &Path, name: &str) -> io::Result<PathBuf> {
    let file = out.join(name);
    if file.exists() {
        let mut n = 1;
        while out.join(format!("{name}.earlier-{n}")).exists() {
            n += 1;
        }
        std::fs::rename(&file, out.join(format!("{name}.earlier-{n}")))?;
    }
    Ok(file)
}

fn open_run(out: &Path, run: u32, soak: Option<&SoakOptions>, ports: usize) -> io::Result<OpenRun> {
    let file = fresh_file(out, &format!("run={run}.arrows"))?;
    let f = std::fs::OpenOptions::new().write(true).create_new(true).open(&file)?;
    let stream = StreamWriter::try_new(BufWriter::new(f), &record_schema()).map_err(io::Error::other)?;
    Ok(OpenRun {
        run,
        file,
        stream,
        builder: RecordBuilder::with_capacity(WRITE_BATCH),
        seq: vec![0; ports],
        ports: HashMap::new(),
        records: 0,
        soak: soak.map(|o| SoakRun::open(out, run, o)).transpose()?,
        keep_records: soak.is_none_or(|o| o.records),
    })
}

fn writer(rx: Receiver<Msg>, out: &Path, soak: Option<SoakOptions>, ports: usize, shared: &Shared) {
    let mut open: Option<OpenRun> = None;
    loop {
        let msg = match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(m) => m,
            Err(RecvTimeoutError::Timeout) => {
                if let Some(o) = open.as_mut() {
                    if let Err(e) = o.flush() {
                        shared.error(format!("{}: {e}", o.file.display()));
                    }
                    tick(o, shared);
                }
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => break,
        };
        match msg {
            Msg::Begin(run, reply) => {
                if let Some(o) = open.take()
                    && let Err(e) = o.finish()
                {
                    shared.error(e.to_string());
                }
                let r = open_run(out, run, soak.as_ref(), ports);
                let _ =
                    reply.send(r.as_ref().map(|o| o.file.clone()).map_err(|e| io::Error::new(e.kind(), e.to_string())));
                open = r.ok();
            }
            Msg::End(run, reply) => {
                let r = match open.take() {
                    Some(o) if o.run == run => o.finish(),
                    other => {
                        open = other;
                        Err(io::Error::new(io::ErrorKind::InvalidInput, format!("run {run} is not open")))
                    }
                };
                let _ = reply.send(r);
            }
            Msg::Batch { port, run, seen } => match open.as_mut() {
                Some(o) if o.run == run => {
                    let p = port as usize;
                    if let Some(soak) = o.soak.as_mut() {
                        let port = if port == 0 { Port::Pipeline } else { Port::Bypass };
                        seen.iter().for_each(|s| soak.offer(s.id, port, s.tsc));
                        tick(o, shared);
                    }
                    if o.keep_records {
                        for s in &seen {
                            o.builder.push_index(s.id, port, s.tsc, o.seq[p], s.len, None);
                            o.seq[p] += 1;
                            if o.soak.is_none() {
                                *o.ports.entry(s.id).or_default() |= 1 << p;
                            }
                        }
                        o.records += seen.len() as u64;
                    }
                    if o.builder.len() >= WRITE_BATCH
                        && let Err(e) = o.flush()
                    {
                        shared.error(format!("{}: {e}", o.file.display()));
                    }
                }
                _ => {
                    shared.outside.fetch_add(seen.len() as u64, Ordering::Relaxed);
                }
            },
        }
    }
    if let Some(o) = open.take()
        && let Err(e) = o.finish()
    {
        shared.error(e.to_string());
    }
}

/// Append the open run's soak interval if it is over.
fn tick(o: &mut OpenRun, shared: &Shared) {
    if let Some(soak) = o.soak.as_mut()
        && let Err(e) = soak.tick()
    {
        shared.error(format!("{}: {e}", soak.file().display()));
    }
}

#[cfg(test)]
mod tests;
