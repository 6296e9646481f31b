//! What the sender reports about a replay, and the pacing checks of a run against the plan.

use serde::Serialize;

pub use latency_results::event::Pacing;

/// tcpreplay's summary of one replay.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ReplayReport {
    /// Packets sent.
    pub packets: u64,
    /// Seconds from the first packet sent to the last.
    pub seconds: f64,
    /// Packets the interface refused.
    pub failed: u64,
}

impl ReplayReport {
    /// Read tcpreplay's closing statistics (printed with and without `-q`):
    ///
    /// ```text
    /// Actual: 500 packets (64000 bytes) sent in 0.249579 seconds
    /// Rated: 256431.8 Bps, 2.05 Mbps, 2003.37 pps
    /// ...
    ///     Failed packets:            0
    /// ```
    pub fn parse(text: &str) -> Option<ReplayReport> {
        let actual = text.lines().find_map(|l| l.trim().strip_prefix("Actual:"))?;
        let words: Vec<&str> = actual.split_whitespace().collect();
        let packets = words.first()?.parse().ok()?;
        let at = words.iter().position(|w| *w == "in")?;
        let seconds = words.get(at + 1)?.parse().ok()?;
        let failed = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("Failed packets:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        Some(ReplayReport { packets, seconds, failed })
    }

    /// The rate achieved, packets per second: the `packets − 1` intervals over the time they took.
    /// (tcpreplay's own `Rated` figure divides all packets by that time, which overstates the rate
    /// of short replays.)
    pub fn pps(&self) -> Option<f64> {
        (self.packets > 1 && self.seconds > 0.0).then(|| (self.packets - 1) as f64 / self.seconds)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Output of tcpreplay 4.4.3 (`-q -T nano --pps=2000`, 500 probes) on a veth.
    const REPORT: &str = "Actual: 500 packets (64000 bytes) sent in 0.249579 seconds
Rated: 256431.8 Bps, 2.05 Mbps, 2003.37 pps
Flows: 82 flows, 328.55 fps, 500 unique flow packets, 0 unique non-flow packets
Statistics for network device: va
\tSuccessful packets:        500
\tFailed packets:            2
\tTruncated packets:         0
\tRetried packets (ENOBUFS): 0
\tRetried packets (EAGAIN):  0
";

    #[test]
    fn reads_tcpreplay_statistics() {
        let r = ReplayReport::parse(REPORT).unwrap();
        assert_eq!(r, ReplayReport { packets: 500, seconds: 0.249579, failed: 2 });
        // 499 intervals in 0.249579 s.
        assert!((r.pps().unwrap() - 1999.37).abs() < 0.01);
        // 3 probes at 10 pps: 2 intervals in 0.2002 s. tcpreplay itself rates this 14.98 pps.
        let short = ReplayReport::parse("Actual: 3 packets (384 bytes) sent in 0.200208 seconds\n").unwrap();
        assert!((short.pps().unwrap() - 9.99).abs() < 0.01);
        assert_eq!(ReplayReport::parse("tcpreplay: nothing"), None);
        assert_eq!(ReplayReport { packets: 1, seconds: 0.0, failed: 0 }.pps(), None);
    }
}
