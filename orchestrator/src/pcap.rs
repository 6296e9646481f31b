//! Minimal reading of classic pcap files: enough to count and iterate the packets of a probe trace.

use std::io::{self, Read};
use std::path::Path;

/// Number of packet records in a classic (libpcap) capture file, µs or ns resolution, either byte
/// order.
pub fn count_packets(path: &Path) -> io::Result<u64> {
    let mut f = io::BufReader::new(std::fs::File::open(path)?);
    let mut header = [0u8; 24];
    f.read_exact(&mut header)?;
    let big_endian = match u32::from_le_bytes([header[0], header[1], header[2], header[3]]) {
        0xa1b2_c3d4 | 0xa1b2_3c4d => false,
        0xd4c3_b2a1 | 0x4d3c_b2a1 => true,
        other => {
            return Err(io::Error::new(io::ErrorKind::InvalidData, format!("not a pcap file (magic {other:#010x})")));
        }
    };
    let mut count = 0;
    let mut rec = [0u8; 16];
    loop {
        match f.read_exact(&mut rec) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(count),
            Err(e) => return Err(e),
        }
        let cap = [rec[8], rec[9], rec[10], rec[11]];
        let caplen = if big_endian { u32::from_be_bytes(cap) } else { u32::from_le_bytes(cap) };
        io::copy(&mut (&mut f).take(u64::from(caplen)), &mut io::sink())?;
        count += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_records_of_a_hand_made_capture() {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
        bytes.extend_from_slice(&[2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 1, 0, 0, 0]);
        for len in [60u32, 64, 1] {
            bytes.extend_from_slice(&[0; 8]);
            bytes.extend_from_slice(&len.to_le_bytes());
            bytes.extend_from_slice(&len.to_le_bytes());
            bytes.extend(std::iter::repeat_n(0xab, len as usize));
        }
        let dir = std::env::temp_dir().join(format!("pcap-count-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("t.pcap");
        std::fs::write(&p, &bytes).unwrap();
        assert_eq!(count_packets(&p).unwrap(), 3);
        std::fs::write(&p, b"not a pcap at all, definitely").unwrap();
        assert!(count_packets(&p).is_err());
    }
}
