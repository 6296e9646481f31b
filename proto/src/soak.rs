//! Constant-memory differentials for long soaks: instead of (or beside) a record per probe copy,
//! the agent keeps an HDR histogram of each probe's differential D = t(pipeline) − t(bypass), in
//! ns, and appends it to the run's interval log (`run=<r>.hlog`) every interval. A crash loses at
//! most the interval under way.
//!
//! The file is a standard HdrHistogram interval log, as Java's `HistogramLogWriter` writes it and
//! `HistogramLogProcessor` reads it. The header comments name what is measured, then come
//! `StartTime`/`BaseTime`, and every interval has two tagged histograms, both V2 with DEFLATE and
//! in base64: `D+` holds the differentials ≥ 0, and `D-` holds the magnitudes of the negative
//! ones (HDR histograms record no negative values). [`Differentials`] is the pair, with quantiles
//! over both signs.
//!
//! Resolution: [`SIGNIFICANT_DIGITS`] significant digits. Each quantile is within 1 part in 1,000
//! of the exact order statistic ([`RESOLUTION`]), from 1 ns up to [`HIGHEST_NS`] (an hour).

use std::io::{self, Write};
use std::time::{Duration, SystemTime};

use hdrhistogram::Histogram;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, IntervalLogWriterBuilder, LogEntry, Tag};
use hdrhistogram::serialization::{Deserializer, V2DeflateSerializer};

/// Significant decimal digits the histograms keep.
pub const SIGNIFICANT_DIGITS: u8 = 3;
/// Relative resolution of every value: 10^−[`SIGNIFICANT_DIGITS`].
pub const RESOLUTION: f64 = 1e-3;
/// The largest differential recorded, ns (an hour); larger ones are recorded as this.
pub const HIGHEST_NS: u64 = 3_600_000_000_000;
/// Tag of the histogram of differentials ≥ 0.
pub const TAG_POSITIVE: &str = "D+";
/// Tag of the histogram of the magnitudes of negative differentials.
pub const TAG_NEGATIVE: &str = "D-";

/// A histogram of signed differentials, ns.
#[derive(Clone, Debug)]
pub struct Differentials {
    positive: Histogram<u64>,
    negative: Histogram<u64>,
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIGHEST_NS, SIGNIFICANT_DIGITS).expect("the bounds are valid")
}

impl Default for Differentials {
    fn default() -> Self {
        Differentials { positive: histogram(), negative: histogram() }
    }
}

impl Differentials {
    /// Record one differential, ns.
    #[inline]
    pub fn record(&mut self, ns: i64) {
        let (h, magnitude) = if ns >= 0 { (&mut self.positive, ns) } else { (&mut self.negative, ns.saturating_neg()) };
        h.saturating_record(magnitude.unsigned_abs().min(HIGHEST_NS));
    }

    /// Add every value of `other`.
    pub fn add(&mut self, other: &Differentials) {
        // Same bounds on both sides, so adding cannot fail.
        let _ = self.positive.add(&other.positive);
        let _ = self.negative.add(&other.negative);
    }

    /// Values recorded.
    pub fn len(&self) -> u64 {
        self.positive.len() + self.negative.len()
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forget every value (the memory stays).
    pub fn reset(&mut self) {
        self.positive.reset();
        self.negative.reset();
    }

    /// The nearest-rank quantile `q` (0 < q ≤ 1; rank ⌈q·n⌉), ns, within [`RESOLUTION`]: the
    /// middle of the histogram bucket that holds it. None when empty.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let n = self.len();
        if n == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * n as f64).ceil() as u64).clamp(1, n);
        let below = self.negative.len();
        // The rank-th smallest: among the negatives (largest magnitude first), or the positives.
        let (h, j, sign) =
            if rank <= below { (&self.negative, below - rank + 1, -1.0) } else { (&self.positive, rank - below, 1.0) };
        let v = h.value_at_quantile(j as f64 / h.len() as f64);
        Some(sign * h.median_equivalent(v) as f64)
    }

    /// Bytes the two histograms hold (constant whatever was recorded).
    pub fn memory_bytes(&self) -> usize {
        2 * (std::mem::size_of::<Histogram<u64>>() + self.positive.distinct_values() * std::mem::size_of::<u64>())
    }
}

/// What a run's interval log is about, written as its header comments.
#[derive(Clone, Debug, PartialEq)]
pub struct LogHeader {
    /// The run.
    pub run: u32,
    /// The TSC rate the differentials were converted with, Hz.
    pub tsc_hz: f64,
    /// Seconds between intervals.
    pub interval_s: f64,
}

/// One interval of a log.
#[derive(Clone, Debug)]
pub struct Interval {
    /// Seconds from the run's start to the interval's start.
    pub start_s: f64,
    /// Its length, s.
    pub duration_s: f64,
    /// Its differentials.
    pub differentials: Differentials,
}

/// A log that is not a differential interval log.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// Writing failed.
    #[error("{0}")]
    Io(#[from] io::Error),
    /// A line is not an interval log line.
    #[error("not an HdrHistogram interval log: {0}")]
    Syntax(String),
    /// A histogram does not decode.
    #[error("interval at {start_s} s: histogram `{tag}` does not decode: {message}")]
    Histogram {
        /// The interval's start.
        start_s: f64,
        /// Its tag.
        tag: String,
        /// Why.
        message: String,
    },
}

/// Write the header of a run's log, starting at `start`.
pub fn write_header(w: &mut impl Write, header: &LogHeader, start: SystemTime) -> io::Result<()> {
    let mut serializer = V2DeflateSerializer::new();
    IntervalLogWriterBuilder::new()
        .add_comment("latency-agent differentials D = t(pipeline) - t(bypass), ns")
        .add_comment(&format!("run {}, TSC {} Hz, interval {} s", header.run, header.tsc_hz, header.interval_s))
        .add_comment(&format!("tags: {TAG_POSITIVE} D >= 0, {TAG_NEGATIVE} -D for D < 0"))
        .with_start_time(start)
        .with_base_time(start)
        .begin_log_with(w, &mut serializer)
        .map(drop)
}

/// Append one interval (`start` from the run's start, `length`) to a log.
pub fn write_interval(w: &mut impl Write, start: Duration, length: Duration, d: &Differentials) -> io::Result<()> {
    let mut serializer = V2DeflateSerializer::new();
    let mut log = IntervalLogWriterBuilder::new().begin_log_with(w, &mut serializer)?;
    for (tag, h) in [(TAG_POSITIVE, &d.positive), (TAG_NEGATIVE, &d.negative)] {
        log.write_histogram(h, start, length, Tag::new(tag)).map_err(|e| io::Error::other(format!("{e:?}")))?;
    }
    Ok(())
}

/// The intervals of a log, in file order. A last line cut short (a crash while writing it) is
/// ignored; anything else that does not read is an error.
pub fn read_log(bytes: &[u8]) -> Result<Vec<Interval>, LogError> {
    // Only complete lines: the writer may have been stopped within one.
    let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(&bytes[..0], |i| &bytes[..=i]);
    let mut out: Vec<Interval> = Vec::new();
    let mut deserializer = Deserializer::new();
    for entry in IntervalLogIterator::new(complete) {
        let entry = entry.map_err(|e| LogError::Syntax(format!("{e:?}")))?;
        let LogEntry::Interval(h) = entry else { continue };
        let start_s = h.start_timestamp().as_secs_f64();
        let tag = h.tag().map_or("", |t| t.as_str()).to_string();
        let decode = |e: String| LogError::Histogram { start_s, tag: tag.clone(), message: e };
        let raw = base64_decode(h.encoded_histogram()).map_err(|e| decode(e.to_string()))?;
        let hist: Histogram<u64> =
            deserializer.deserialize(&mut io::Cursor::new(raw)).map_err(|e| decode(format!("{e:?}")))?;
        if out.last().is_none_or(|i: &Interval| i.start_s != start_s) {
            out.push(Interval {
                start_s,
                duration_s: h.duration().as_secs_f64(),
                differentials: Differentials::default(),
            });
        }
        let last = out.last_mut().expect("pushed above");
        let target = match tag.as_str() {
            TAG_POSITIVE => &mut last.differentials.positive,
            TAG_NEGATIVE => &mut last.differentials.negative,
            other => return Err(LogError::Syntax(format!("unknown tag `{other}` at {start_s} s"))),
        };
        target.add(&hist).map_err(|e| decode(format!("{e:?}")))?;
    }
    Ok(out)
}

/// Standard base64 (with padding), as interval logs encode histograms.
fn base64_decode(text: &str) -> Result<Vec<u8>, base64::DecodeError> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.decode(text.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values from a fixed linear congruential generator: a two-sided spread around 300 µs with
    /// a tail, and some negatives.
    fn values(n: usize) -> Vec<i64> {
        let mut x: u64 = 12345;
        (0..n)
            .map(|k| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let u = (x >> 11) as f64 / (1u64 << 53) as f64;
                if k % 50 == 0 { -(1_000.0 + 20_000.0 * u) as i64 } else { (300_000.0 + 40_000.0 * u * u * u) as i64 }
            })
            .collect()
    }

    /// The quantiles agree with the exact nearest-rank order statistics of the sorted values
    /// within the stated resolution, on both sides of zero.
    #[test]
    fn quantiles_match_the_sorted_values_within_the_resolution() {
        let v = values(200_000);
        let mut d = Differentials::default();
        v.iter().for_each(|&x| d.record(x));
        let mut sorted = v.clone();
        sorted.sort_unstable();
        assert_eq!(d.len(), v.len() as u64);
        for q in [0.001, 0.01, 0.02, 0.025, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99, 0.999, 1.0] {
            let exact = sorted[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1] as f64;
            let got = d.quantile(q).unwrap();
            assert!((got - exact).abs() <= RESOLUTION * exact.abs() + 1.0, "q {q}: {got} vs exact {exact}");
        }
        assert_eq!(Differentials::default().quantile(0.5), None);
    }

    #[test]
    fn a_log_round_trips_through_the_standard_format_and_survives_a_cut_last_line() {
        let v = values(30_000);
        let mut buf = Vec::new();
        let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        write_header(&mut buf, &LogHeader { run: 3, tsc_hz: 2.4e9, interval_s: 10.0 }, start).unwrap();
        let mut all = Differentials::default();
        for (k, chunk) in v.chunks(10_000).enumerate() {
            let mut d = Differentials::default();
            chunk.iter().for_each(|&x| d.record(x));
            all.add(&d);
            write_interval(&mut buf, Duration::from_secs(10 * k as u64), Duration::from_secs(10), &d).unwrap();
        }
        let text = String::from_utf8(buf.clone()).unwrap();
        assert!(text.starts_with("#latency-agent differentials"), "{text}");
        assert!(text.contains("#[StartTime: 1800000000.000 (seconds since epoch)]"), "{text}");
        // Java's V2 + DEFLATE cookie, base64: what HistogramLogProcessor reads.
        assert!(text.lines().any(|l| l.starts_with("Tag=D+,10.000,10.000,") && l.contains(",HISTF")), "{text}");
        let intervals = read_log(&buf).unwrap();
        assert_eq!(
            intervals.iter().map(|i| (i.start_s, i.duration_s)).collect::<Vec<_>>(),
            [(0.0, 10.0), (10.0, 10.0), (20.0, 10.0)]
        );
        let mut merged = Differentials::default();
        intervals.iter().for_each(|i| merged.add(&i.differentials));
        assert_eq!(merged.len(), 30_000);
        for q in [0.01, 0.5, 0.99] {
            assert_eq!(merged.quantile(q), all.quantile(q), "q {q}");
        }
        // A crash while the last line was being written: the complete intervals still read.
        let cut = &buf[..buf.len() - 40];
        assert_eq!(read_log(cut).unwrap().len(), 3, "the cut line is the last D- histogram of interval 3");
        assert!(read_log(b"Tag=D+,0.000,1.000,5.000,notbase64!\n").is_err());
    }
}
