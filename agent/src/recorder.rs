//! The capture pipeline: one busy-polling thread per port (pinned to its core) parses probe ids
//! and hands batches to a writer thread through a bounded queue — a full queue drops the batch and
//! counts it, it never blocks a poller. The writer appends the records of the current run to an
//! Arrow IPC stream (`run=<r>.arrows`), flushed per batch so that a crash keeps what was written.
//! Runs are started and ended by the controller, not by time gaps.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufWriter};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use arrow_ipc::writer::StreamWriter;
use latency_proto::control::RunCounters;
use latency_proto::probe::{self, ProbeFormat};
use latency_proto::schema::{Port, RecordBuilder, record_schema};

use crate::capture::RxPort;

/// Records per message from a poller to the writer.
pub const POLLER_BATCH: usize = 256;
/// Records per Arrow batch written (and flushed).
const WRITE_BATCH: usize = 4096;

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
    Batch { port: Port, run: u32, seen: Vec<Seen> },
}

#[derive(Default)]
struct Shared {
    stop: AtomicBool,
    run: AtomicU32,
    non_probe: AtomicU64,
    dropped: AtomicU64,
    outside: AtomicU64,
    errors: Mutex<Vec<String>>,
}

/// A running capture.
pub struct Recorder {
    shared: Arc<Shared>,
    tx: SyncSender<Msg>,
    threads: Vec<JoinHandle<()>>,
    /// Counter values at the start of the current run.
    base: (u64, u64, u64),
}

impl Recorder {
    /// Start one poller per port and the writer.
    pub fn start(ports: Vec<Box<dyn RxPort>>, opts: Options) -> io::Result<Recorder> {
        std::fs::create_dir_all(&opts.out)?;
        let shared = Arc::new(Shared::default());
        let (tx, rx) = mpsc::sync_channel::<Msg>(opts.queue.max(1));
        let mut threads = Vec::new();
        let out = opts.out.clone();
        let writer_shared = shared.clone();
        threads
            .push(std::thread::Builder::new().name("writer".into()).spawn(move || writer(rx, &out, &writer_shared))?);
        for (i, port) in ports.into_iter().enumerate() {
            let which = if i == 0 { Port::Pipeline } else { Port::Bypass };
            let (shared, tx, format, core) = (shared.clone(), tx.clone(), opts.format, opts.cores.get(i).copied());
            threads.push(
                std::thread::Builder::new()
                    .name(format!("poll-{}", port.name()))
                    .spawn(move || poller(port, which, core, format, &shared, &tx))?,
            );
        }
        Ok(Recorder { shared, tx, threads, base: (0, 0, 0) })
    }

    /// Open run `run`: records from now on go to its file.
    pub fn begin(&mut self, run: u32) -> io::Result<PathBuf> {
        if run == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "runs are numbered from 1"));
        }
        let (reply, answer) = mpsc::channel();
        self.tx.send(Msg::Begin(run, reply)).map_err(|_| io::Error::other("writer stopped"))?;
        let file = answer.recv().map_err(|_| io::Error::other("writer stopped"))??;
        self.base = self.totals();
        self.shared.run.store(run, Ordering::SeqCst);
        Ok(file)
    }

    /// Close run `run` and return its counters, after the records queued before the call.
    pub fn end(&mut self, run: u32) -> io::Result<RunCounters> {
        if self.shared.run.load(Ordering::SeqCst) != run {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("run {run} is not open")));
        }
        self.shared.run.store(0, Ordering::SeqCst);
        // Let every poller finish the batch it may be holding for this run.
        std::thread::sleep(Duration::from_millis(2));
        let (reply, answer) = mpsc::channel();
        self.tx.send(Msg::End(run, reply)).map_err(|_| io::Error::other("writer stopped"))?;
        let mut c = answer.recv().map_err(|_| io::Error::other("writer stopped"))??;
        let now = self.totals();
        c.non_probe = now.0 - self.base.0;
        c.dropped = now.1 - self.base.1;
        c.outside_run = now.2 - self.base.2;
        Ok(c)
    }

    fn totals(&self) -> (u64, u64, u64) {
        let s = &self.shared;
        (s.non_probe.load(Ordering::Relaxed), s.dropped.load(Ordering::Relaxed), s.outside.load(Ordering::Relaxed))
    }

    /// Errors the threads ran into (e.g. a run file that could not be written).
    pub fn errors(&self) -> Vec<String> {
        self.shared.errors.lock().map(|e| e.clone()).unwrap_or_default()
    }

    /// Stop the pollers and the writer (an open run file is finished) and release the ports.
    pub fn stop(self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        drop(self.tx);
        for t in self.threads {
            let _ = t.join();
        }
    }
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn pin(core: usize) -> io::Result<()> {
    crate::sys::pin_current_thread(core)
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
fn pin(_: usize) -> io::Result<()> {
    Err(io::Error::new(io::ErrorKind::Unsupported, "pinning is implemented for x86_64 Linux only"))
}

fn poller(
    mut port: Box<dyn RxPort>,
    which: Port,
    core: Option<usize>,
    format: ProbeFormat,
    shared: &Shared,
    tx: &SyncSender<Msg>,
) {
    if let Some(c) = core
        && let Err(e) = pin(c)
        && let Ok(mut errs) = shared.errors.lock()
    {
        errs.push(format!("{}: cannot pin to core {c}: {e}", port.name()));
    }
    let mut seen: Vec<Seen> = Vec::with_capacity(POLLER_BATCH);
    let mut non_probe = 0u64;
    while !shared.stop.load(Ordering::Relaxed) {
        let n = port.poll(POLLER_BATCH - seen.len(), &mut |frame, tsc| match probe::parse(frame, format) {
            Some(p) => seen.push(Seen { id: p.id, tsc, len: frame.len().min(u16::MAX as usize) as u16 }),
            None => non_probe += 1,
        });
        if non_probe > 0 {
            shared.non_probe.fetch_add(non_probe, Ordering::Relaxed);
            non_probe = 0;
        }
        if !seen.is_empty() && (n == 0 || seen.len() >= POLLER_BATCH) {
            let run = shared.run.load(Ordering::SeqCst);
            let batch = std::mem::replace(&mut seen, Vec::with_capacity(POLLER_BATCH));
            if run == 0 {
                shared.outside.fetch_add(batch.len() as u64, Ordering::Relaxed);
            } else if let Err(TrySendError::Full(Msg::Batch { seen, .. })) =
                tx.try_send(Msg::Batch { port: which, run, seen: batch })
            {
                shared.dropped.fetch_add(seen.len() as u64, Ordering::Relaxed);
            }
        }
        if n == 0 {
            std::hint::spin_loop();
        }
    }
}

/// The open run of the writer.
struct OpenRun {
    run: u32,
    file: PathBuf,
    stream: StreamWriter<BufWriter<File>>,
    builder: RecordBuilder,
    seq: [u64; 2],
    ports: HashMap<u64, u8>,
    records: u64,
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
        for mask in self.ports.values() {
            match mask {
                3 => c.matched += 1,
                1 => c.pipeline_only += 1,
                _ => c.bypass_only += 1,
            }
        }
        Ok(c)
    }
}

fn open_run(out: &Path, run: u32) -> io::Result<OpenRun> {
    let file = out.join(format!("run={run}.arrows"));
    // A file from an earlier attempt of this run (a retry, or a resumed study) is kept aside, never
    // overwritten.
    if file.exists() {
        let mut n = 1;
        while out.join(format!("run={run}.arrows.earlier-{n}")).exists() {
            n += 1;
        }
        std::fs::rename(&file, out.join(format!("run={run}.arrows.earlier-{n}")))?;
    }
    let f = std::fs::OpenOptions::new().write(true).create_new(true).open(&file)?;
    let stream = StreamWriter::try_new(BufWriter::new(f), &record_schema()).map_err(io::Error::other)?;
    Ok(OpenRun {
        run,
        file,
        stream,
        builder: RecordBuilder::with_capacity(WRITE_BATCH),
        seq: [0, 0],
        ports: HashMap::new(),
        records: 0,
    })
}

fn writer(rx: Receiver<Msg>, out: &Path, shared: &Shared) {
    let mut open: Option<OpenRun> = None;
    let record_error = |e: String| {
        if let Ok(mut errs) = shared.errors.lock() {
            errs.push(e);
        }
    };
    loop {
        let msg = match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(m) => m,
            Err(RecvTimeoutError::Timeout) => {
                if let Some(o) = open.as_mut()
                    && let Err(e) = o.flush()
                {
                    record_error(format!("{}: {e}", o.file.display()));
                }
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => break,
        };
        match msg {
            Msg::Begin(run, reply) => {
                if let Some(o) = open.take() {
                    let _ = o.finish();
                }
                let r = open_run(out, run);
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
                    for s in &seen {
                        o.builder.push(s.id, port, s.tsc, o.seq[p], s.len, None);
                        o.seq[p] += 1;
                        *o.ports.entry(s.id).or_default() |= 1 << p;
                    }
                    o.records += seen.len() as u64;
                    if o.builder.len() >= WRITE_BATCH
                        && let Err(e) = o.flush()
                    {
                        record_error(format!("{}: {e}", o.file.display()));
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
        record_error(e.to_string());
    }
}
