//! Soak mode of the writer: each probe's two copies are paired in a fixed-size table as they
//! arrive, and their differential goes into an HDR histogram ([`Differentials`]). The histogram is
//! appended to the run's interval log every interval and then cleared. Memory stays the same
//! however long the run is: one table and one pair of histograms per open run.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use latency_proto::schema::Port;
use latency_proto::soak::{self, Differentials, LogHeader};

/// Settings of soak mode.
#[derive(Clone, Copy, Debug)]
pub struct SoakOptions {
    /// Seconds between the intervals appended to the log.
    pub interval: Duration,
    /// Whether per-copy records are written too.
    pub records: bool,
    /// The measured TSC rate, Hz: converts differentials to ns.
    pub tsc_hz: f64,
}

/// Slots of the pairing table: copies of different probes whose ids are equal modulo this are
/// never waiting at the same time unless one of them was lost.
pub const PAIRING_SLOTS: usize = 1 << 16;

#[derive(Clone, Copy, Default)]
struct Slot {
    id: u64,
    tsc: u64,
    /// 0: empty; otherwise the waiting copy's port + 1.
    port: u8,
}

/// Pairs the two copies of each probe in a direct-mapped table of [`PAIRING_SLOTS`] slots by
/// probe id. A copy that finds its slot taken by another probe's (a copy whose partner was lost,
/// or a duplicate) pushes it out, and that one counts as seen on one port only.
pub struct Pairer {
    slots: Vec<Slot>,
    /// Probes seen on both ports.
    pub matched: u64,
    /// Copies pushed out unpaired, per port.
    pub unpaired: [u64; 2],
}

impl Default for Pairer {
    fn default() -> Self {
        Pairer { slots: vec![Slot::default(); PAIRING_SLOTS], matched: 0, unpaired: [0, 0] }
    }
}

impl Pairer {
    /// One copy of probe `id`; the (pipeline, bypass) stamps when it completes a pair.
    #[inline]
    pub fn offer(&mut self, id: u64, port: Port, tsc: u64) -> Option<(u64, u64)> {
        let s = &mut self.slots[id as usize % PAIRING_SLOTS];
        let p = port as u8 + 1;
        if s.port != 0 && s.id == id && s.port != p {
            s.port = 0;
            self.matched += 1;
            return Some(if port == Port::Pipeline { (tsc, s.tsc) } else { (s.tsc, tsc) });
        }
        if s.port != 0 {
            self.unpaired[usize::from(s.port - 1)] += 1;
        }
        *s = Slot { id, tsc, port: p };
        None
    }

    /// Copies unpaired so far, waiting or pushed out: (pipeline only, bypass only).
    pub fn one_port_only(&self) -> (u64, u64) {
        let waiting = |p: u8| self.slots.iter().filter(|s| s.port == p).count() as u64;
        (self.unpaired[0] + waiting(1), self.unpaired[1] + waiting(2))
    }
}

/// The soak state of the open run.
pub struct SoakRun {
    file: PathBuf,
    log: BufWriter<File>,
    pub(super) pairer: Pairer,
    interval: Differentials,
    started: Instant,
    interval_start: Duration,
    every: Duration,
    ns_per_tick: f64,
}

impl SoakRun {
    /// Start run `run`'s log in `out` (`run=<r>.hlog`; one of an earlier attempt is kept aside).
    pub fn open(out: &Path, run: u32, o: &SoakOptions) -> io::Result<SoakRun> {
        let file = super::fresh_file(out, &format!("run={run}.hlog"))?;
        let mut log = BufWriter::new(File::options().write(true).create_new(true).open(&file)?);
        let header = LogHeader { run, tsc_hz: o.tsc_hz, interval_s: o.interval.as_secs_f64() };
        soak::write_header(&mut log, &header, SystemTime::now())?;
        log.flush()?;
        Ok(SoakRun {
            file,
            log,
            pairer: Pairer::default(),
            interval: Differentials::default(),
            started: Instant::now(),
            interval_start: Duration::ZERO,
            every: o.interval,
            ns_per_tick: 1e9 / o.tsc_hz,
        })
    }

    /// The log file.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// One probe copy.
    #[inline]
    pub fn offer(&mut self, id: u64, port: Port, tsc: u64) {
        if let Some((p, b)) = self.pairer.offer(id, port, tsc) {
            let ticks = p.wrapping_sub(b) as i64;
            self.interval.record((ticks as f64 * self.ns_per_tick).round() as i64);
        }
    }

    /// Append the interval under way if it is over.
    pub fn tick(&mut self) -> io::Result<()> {
        if self.started.elapsed() >= self.interval_start + self.every { self.append() } else { Ok(()) }
    }

    /// Append the interval under way, synced to disk, and start the next.
    fn append(&mut self) -> io::Result<()> {
        let now = self.started.elapsed();
        soak::write_interval(&mut self.log, self.interval_start, now - self.interval_start, &self.interval)?;
        self.log.flush()?;
        self.log.get_ref().sync_data()?;
        self.interval.reset();
        self.interval_start = now;
        Ok(())
    }

    /// Append the last interval and close the log: the counts of the pairing.
    pub fn finish(mut self) -> io::Result<(PathBuf, Pairer)> {
        self.append()?;
        Ok((self.file, self.pairer))
    }
}
