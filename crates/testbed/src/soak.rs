//! The soak log of a simulated run: what the agent's soak mode writes ([`latency_proto::soak`]),
//! made from the run's records. Copies are paired in arrival order, as the agent pairs them, and
//! each pair's differential goes into the interval in which its later copy arrived. An interval
//! starts every `interval_s` of TSC time from the run's first copy.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use arrow_array::RecordBatch;
use arrow_array::cast::AsArray;
use arrow_array::types::{UInt8Type, UInt64Type};
use latency_proto::schema::{Port, col};
use latency_proto::soak::{self, Differentials, LogHeader};

/// The histogram log of a run's `batches` (stamps at `tsc_hz`), an interval every `interval_s`.
pub fn log_from_records(batches: &[RecordBatch], tsc_hz: f64, interval_s: f64, run: u32) -> Vec<u8> {
    let mut copies: Vec<(u64, u8, u64)> = Vec::new();
    for b in batches {
        let (Some(id), Some(port), Some(tsc)) =
            (b.column_by_name(col::PROBE_ID), b.column_by_name(col::PORT), b.column_by_name(col::TSC))
        else {
            continue;
        };
        let (id, port, tsc) =
            (id.as_primitive::<UInt64Type>(), port.as_primitive::<UInt8Type>(), tsc.as_primitive::<UInt64Type>());
        copies.extend((0..b.num_rows()).map(|k| (id.value(k), port.value(k), tsc.value(k))));
    }
    copies.sort_by_key(|c| c.2);
    let mut out = Vec::new();
    let header = LogHeader { run, tsc_hz, interval_s };
    soak::write_header(&mut out, &header, SystemTime::UNIX_EPOCH).expect("writing to memory");
    let ticks = interval_s * tsc_hz;
    let first = copies.first().map_or(0, |c| c.2);
    let mut waiting: HashMap<u64, (u8, u64)> = HashMap::new();
    let mut interval = Differentials::default();
    let mut k = 0u64;
    let mut flush = |interval: &mut Differentials, k: u64| {
        let start = Duration::from_secs_f64(k as f64 * interval_s);
        soak::write_interval(&mut out, start, Duration::from_secs_f64(interval_s), interval)
            .expect("writing to memory");
        interval.reset();
    };
    for (id, port, tsc) in copies {
        while (tsc - first) as f64 >= (k + 1) as f64 * ticks {
            flush(&mut interval, k);
            k += 1;
        }
        match waiting.remove(&id) {
            Some((other, t)) if other != port => {
                let (p, b) = if port == Port::Pipeline as u8 { (tsc, t) } else { (t, tsc) };
                interval.record((p.wrapping_sub(b) as i64 as f64 * 1e9 / tsc_hz).round() as i64);
            }
            _ => {
                waiting.insert(id, (port, tsc));
            }
        }
    }
    flush(&mut interval, k);
    out
}
