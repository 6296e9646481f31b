//! Reading classic (libpcap) capture files record by record, with errors that say where a file
//! is broken: a pcapng file by name, a truncated record with its byte offset and the records read
//! before it. The workspace's one pcap reader: trace inspection, the schedule's trace extents,
//! the agent's originated traces and the reflect join of the sender's capture all read with it.
//! Hand-written rather than pcap-file's reader (which writes traces here), because that one
//! reports every such file as a bare "Error reading bytes", and refuses every record longer than
//! the capture's snapshot length (a frame larger than `tcpdump -s` cut short is a valid record).

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;

/// Length of the file header.
const HEADER_LEN: usize = 24;
/// Length of a record header.
const RECORD_HEADER_LEN: usize = 16;
/// Largest captured length of one record: libpcap's largest snapshot length (256 KiB). A larger
/// one means a corrupt file, and would otherwise be allocated as asked.
pub const MAX_RECORD: u32 = 262_144;
/// The magic number of a pcapng section header block (the same in both byte orders).
const PCAPNG_MAGIC: u32 = 0x0a0d_0d0a;

/// Why a file cannot be read as a classic pcap.
#[derive(Debug, thiserror::Error)]
pub enum PcapError {
    /// The file cannot be opened or read.
    #[error("cannot read: {0}")]
    Io(#[from] io::Error),
    /// A directory, device, pipe or socket.
    #[error("cannot read: not a regular file ({0})")]
    NotAFile(&'static str),
    /// Zero bytes.
    #[error("the file is empty (0 bytes), not a pcap")]
    Empty,
    /// A pcapng file.
    #[error("a pcapng file, not a classic pcap: convert it with `editcap -F pcap IN.pcapng OUT.pcap`")]
    Pcapng,
    /// Some other file.
    #[error("not a pcap file (magic number {0:#010x})")]
    Magic(u32),
    /// Shorter than the file header.
    #[error("truncated: the pcap header has {0} of its 24 bytes")]
    ShortHeader(usize),
    /// The last record is cut short.
    #[error(
        "truncated at byte {offset}: record {record} has {present} of its {needed} bytes ({complete} complete records read)"
    )]
    Truncated {
        /// Where the incomplete record starts.
        offset: u64,
        /// Its number, from 1.
        record: u64,
        /// Bytes of it in the file (header included).
        present: u64,
        /// Bytes it needs (header included).
        needed: u64,
        /// Records read before it.
        complete: u64,
    },
    /// A record claims more bytes than any capture holds.
    #[error("corrupt record {record} at byte {offset}: it claims {caplen} captured bytes (at most {MAX_RECORD})")]
    Oversized {
        /// Where the record starts.
        offset: u64,
        /// Its number, from 1.
        record: u64,
        /// The captured length it claims.
        caplen: u32,
    },
}

impl From<PcapError> for io::Error {
    fn from(e: PcapError) -> io::Error {
        match e {
            PcapError::Io(e) => e,
            other => io::Error::new(io::ErrorKind::InvalidData, other.to_string()),
        }
    }
}

/// One record of a capture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<'a> {
    /// Its time stamp, ns since the epoch (µs stamps scaled; at most about 4.3 × 10^18, so it also
    /// fits an `i64`).
    pub ns: u64,
    /// The captured bytes (as many as the snapshot length kept).
    pub data: &'a [u8],
}

/// Reads the records of a classic pcap (µs or ns time stamps, either byte order).
pub struct Reader<R> {
    src: R,
    big_endian: bool,
    /// Bytes read so far.
    offset: u64,
    /// Complete records read so far.
    records: u64,
    /// Whether time stamps are in ns (else µs).
    nanos: bool,
    /// Time stamps of the first and the last record read, ns.
    stamps: Option<(u64, u64)>,
    buf: Vec<u8>,
}

/// Fill `buf` as far as the source goes; the number of bytes read.
fn read_full(src: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match src.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

impl Reader<BufReader<File>> {
    /// Open the regular file at `path` and read its header.
    pub fn open(path: &Path) -> Result<Self, PcapError> {
        // Checked before opening: opening a FIFO would block until a writer appears.
        let meta = std::fs::metadata(path)?;
        if !meta.is_file() {
            return Err(PcapError::NotAFile(if meta.is_dir() { "a directory" } else { "a device, pipe or socket" }));
        }
        Reader::new(BufReader::new(File::open(path)?))
    }
}

impl<R: Read> Reader<R> {
    /// Read the file header from `src`.
    pub fn new(mut src: R) -> Result<Self, PcapError> {
        let mut header = [0u8; HEADER_LEN];
        let n = read_full(&mut src, &mut header)?;
        if n == 0 {
            return Err(PcapError::Empty);
        }
        if n >= 4 {
            let (big_endian, nanos) = match u32::from_le_bytes([header[0], header[1], header[2], header[3]]) {
                0xa1b2_c3d4 => (false, false),
                0xa1b2_3c4d => (false, true),
                0xd4c3_b2a1 => (true, false),
                0x4d3c_b2a1 => (true, true),
                PCAPNG_MAGIC => return Err(PcapError::Pcapng),
                other => return Err(PcapError::Magic(other)),
            };
            if n == HEADER_LEN {
                let offset = HEADER_LEN as u64;
                return Ok(Reader { src, big_endian, offset, records: 0, nanos, stamps: None, buf: Vec::new() });
            }
        }
        Err(PcapError::ShortHeader(n))
    }

    /// The captured bytes of the next record, `None` at the end of the file.
    pub fn next_record(&mut self) -> Result<Option<&[u8]>, PcapError> {
        Ok(self.next_packet()?.map(|p| p.data))
    }

    /// The next record with its time stamp, `None` at the end of the file.
    pub fn next_packet(&mut self) -> Result<Option<Packet<'_>>, PcapError> {
        let at = self.offset;
        let record = self.records + 1;
        let mut header = [0u8; RECORD_HEADER_LEN];
        let n = read_full(&mut self.src, &mut header)?;
        let truncated = |present: usize, needed: usize| PcapError::Truncated {
            offset: at,
            record,
            present: present as u64,
            needed: needed as u64,
            complete: record - 1,
        };
        if n == 0 {
            return Ok(None);
        }
        if n < RECORD_HEADER_LEN {
            return Err(truncated(n, RECORD_HEADER_LEN));
        }
        let word = |at: usize| {
            let b = [header[at], header[at + 1], header[at + 2], header[at + 3]];
            if self.big_endian { u32::from_be_bytes(b) } else { u32::from_le_bytes(b) }
        };
        let caplen = word(8);
        let fraction = u64::from(word(4)) * if self.nanos { 1 } else { 1000 };
        let stamp = u64::from(word(0)) * 1_000_000_000 + fraction;
        if caplen > MAX_RECORD {
            return Err(PcapError::Oversized { offset: at, record, caplen });
        }
        let len = caplen as usize;
        self.buf.resize(len, 0);
        let got = read_full(&mut self.src, &mut self.buf)?;
        if got < len {
            return Err(truncated(RECORD_HEADER_LEN + got, RECORD_HEADER_LEN + len));
        }
        self.offset += (RECORD_HEADER_LEN + len) as u64;
        self.records = record;
        self.stamps = Some(self.stamps.map_or((stamp, stamp), |(first, _)| (first, stamp)));
        Ok(Some(Packet { ns: stamp, data: &self.buf }))
    }

    /// Complete records read so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Time from the first record read to the last, ns (0 before two records; saturating when the
    /// stamps go back).
    pub fn span_ns(&self) -> u64 {
        self.stamps.map_or(0, |(first, last)| last.saturating_sub(first))
    }
}

/// How many records a capture holds and the time they span.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    /// Packet records.
    pub packets: u64,
    /// Time from the first record to the last, ns.
    pub span_ns: u64,
}

impl Extent {
    /// The mean rate of the records as time-stamped, packets per second (none for fewer than two
    /// records or no time between them).
    pub fn rate_pps(&self) -> Option<f64> {
        (self.packets > 1 && self.span_ns > 0).then(|| (self.packets - 1) as f64 * 1e9 / self.span_ns as f64)
    }
}

/// The [`Extent`] of a classic capture file (as [`count_packets`] reads it).
pub fn extent(path: &Path) -> io::Result<Extent> {
    let mut r = Reader::open(path)?;
    while r.next_record()?.is_some() {}
    Ok(Extent { packets: r.records(), span_ns: r.span_ns() })
}

/// Number of packet records in a classic (libpcap) capture file, µs or ns resolution, either byte
/// order; a file that is not one, or is truncated, is an error.
pub fn count_packets(path: &Path) -> io::Result<u64> {
    extent(path).map(|e| e.packets)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capture(lens: &[u32]) -> Vec<u8> {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
        bytes.extend_from_slice(&[2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 1, 0, 0, 0]);
        for &len in lens {
            bytes.extend_from_slice(&[0; 8]);
            bytes.extend_from_slice(&len.to_le_bytes());
            bytes.extend_from_slice(&len.to_le_bytes());
            bytes.extend(std::iter::repeat_n(0xab, len as usize));
        }
        bytes
    }

    fn read_all(bytes: &[u8]) -> Result<Vec<usize>, String> {
        let mut r = Reader::new(bytes).map_err(|e| e.to_string())?;
        let mut lens = Vec::new();
        while let Some(rec) = r.next_record().map_err(|e| e.to_string())? {
            lens.push(rec.len());
        }
        Ok(lens)
    }

    #[test]
    fn counts_records_of_a_hand_made_capture() {
        let dir = std::env::temp_dir().join(format!("pcap-count-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("t.pcap");
        std::fs::write(&p, capture(&[60, 64, 1])).unwrap();
        assert_eq!(count_packets(&p).unwrap(), 3);
        std::fs::write(&p, b"not a pcap at all, definitely").unwrap();
        assert!(count_packets(&p).is_err());
        assert_eq!(count_packets(&dir).unwrap_err().to_string(), "cannot read: not a regular file (a directory)");
    }

    #[test]
    fn broken_files_say_where_and_what() {
        let whole = capture(&[60, 64, 100]);
        assert_eq!(read_all(&whole), Ok(vec![60, 64, 100]));
        assert_eq!(read_all(&whole[..24]), Ok(vec![]));
        // Cut in the last record's data, then in its header.
        let third = 24 + 2 * 16 + 60 + 64;
        assert_eq!(
            read_all(&whole[..whole.len() - 1]).unwrap_err(),
            format!("truncated at byte {third}: record 3 has 115 of its 116 bytes (2 complete records read)")
        );
        assert_eq!(
            read_all(&whole[..third + 5]).unwrap_err(),
            format!("truncated at byte {third}: record 3 has 5 of its 16 bytes (2 complete records read)")
        );
        assert_eq!(read_all(b"").unwrap_err(), "the file is empty (0 bytes), not a pcap");
        assert_eq!(read_all(&whole[..10]).unwrap_err(), "truncated: the pcap header has 10 of its 24 bytes");
        let mut ng = 0x0a0d_0d0au32.to_le_bytes().to_vec();
        ng.extend_from_slice(&[0; 24]);
        assert!(read_all(&ng).unwrap_err().starts_with("a pcapng file, not a classic pcap"));
        assert_eq!(
            read_all(b"GET / HTTP/1.1\r\n\r\nxxxxxxxx").unwrap_err(),
            "not a pcap file (magic number 0x20544547)"
        );
        let mut huge = capture(&[]);
        huge.extend_from_slice(&[0; 8]);
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        huge.extend_from_slice(&[0; 4]);
        assert_eq!(
            read_all(&huge).unwrap_err(),
            "corrupt record 1 at byte 24: it claims 4294967295 captured bytes (at most 262144)"
        );
    }

    #[test]
    fn extents_read_microsecond_and_nanosecond_stamps_in_either_byte_order() {
        // Three records 250 µs apart from t = 7 s: 2 intervals in 500 µs, 4,000 packets per second.
        let record = |big: bool, secs: u32, frac: u32| {
            let w = |v: u32| if big { v.to_be_bytes() } else { v.to_le_bytes() };
            [w(secs), w(frac), w(4), w(4)].concat().into_iter().chain([1, 2, 3, 4]).collect::<Vec<u8>>()
        };
        for (magic, nanos) in [(0xa1b2_c3d4u32, false), (0xa1b2_3c4d, true)] {
            for big in [false, true] {
                let mut bytes = if big { magic.to_be_bytes() } else { magic.to_le_bytes() }.to_vec();
                bytes.extend_from_slice(&[0; 20]);
                let unit = if nanos { 1000 } else { 1 };
                for k in 0..3 {
                    bytes.extend(record(big, 7, k * 250 * unit));
                }
                let mut r = Reader::new(&bytes[..]).unwrap();
                let mut stamps = Vec::new();
                while let Some(p) = r.next_packet().unwrap() {
                    assert_eq!(p.data, [1, 2, 3, 4]);
                    stamps.push(p.ns);
                }
                assert_eq!(stamps, [7_000_000_000, 7_000_250_000, 7_000_500_000], "{magic:x} big-endian {big}");
                let e = Extent { packets: r.records(), span_ns: r.span_ns() };
                assert_eq!((e.packets, e.span_ns), (3, 500_000), "{magic:x} big-endian {big}");
                assert_eq!(e.rate_pps(), Some(4000.0));
            }
        }
        assert_eq!(Extent { packets: 1, span_ns: 0 }.rate_pps(), None);
    }
}
