//! Generated probe traces, read back independently of the generator: with etherparse (headers,
//! IPv4 and UDP checksums, VLAN tags, destinations against the programs' tables), pcap-file (the
//! records and timestamps), scapy (frame sizes and checksums) and, where installed, tcpdump; and inspection of a hand-built pcap with
//! a duplicated id and a packet that is not a probe; pcaps written byte by byte with what a replay
//! cannot send (link type, record lengths, time stamps, frame sizes) or with time stamps a
//! `timing: trace` replay cannot follow, and one slower than a packet a second.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use crate::common::{orchestrate, runs_here, test_python, tmp_dir};
use etherparse::{LinkExtSlice, NetSlice, SlicedPacket, TransportSlice};
use latency_plan::Generated;
use latency_plan::ProbeFormat;
use latency_plan::TraceTemplate;
use latency_plan::digest;
use latency_plan::probes;
use latency_plan::trace;
use latency_plan::trace::TraceError;
use latency_proto::probe::{self, Probe};
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapReader, PcapWriter};
use pcap_file::{Endianness, TsResolution};

const TEMPLATES: [TraceTemplate; 4] =
    [TraceTemplate::Forward, TraceTemplate::FiveTuple, TraceTemplate::RemoveHeader, TraceTemplate::Checksum];
const FORMATS: [ProbeFormat; 2] = [ProbeFormat::Latencylab, ProbeFormat::Compact];

fn file_name(t: TraceTemplate, f: ProbeFormat) -> String {
    format!("{}-{}.pcap", t.name(), f.name())
}

/// All packets of a pcap with their timestamps, read with pcap-file.
fn packets(path: &Path) -> (PcapHeader, Vec<(Duration, Vec<u8>)>) {
    let mut r = PcapReader::new(std::fs::File::open(path).unwrap()).unwrap();
    let header = r.header();
    let mut out = Vec::new();
    while let Some(p) = r.next_packet() {
        let p = p.unwrap();
        assert_eq!(p.orig_len as usize, p.data.len(), "whole frames are captured");
        out.push((p.timestamp, p.data.into_owned()));
    }
    (header, out)
}

/// What a test needs of a parsed probe frame.
#[derive(Debug)]
struct Decoded {
    vlan: Option<u16>,
    src: [u8; 4],
    dst: [u8; 4],
    sport: u16,
    dport: u16,
    /// Offset of the UDP payload in the frame.
    payload_at: usize,
}

/// Parse a frame with etherparse and check its IPv4 and UDP checksums.
fn decode(frame: &[u8]) -> Decoded {
    let s = SlicedPacket::from_ethernet(frame).unwrap();
    let vlan = match s.link_exts.as_slice() {
        [] => None,
        [LinkExtSlice::Vlan(v)] => Some(v.vlan_identifier().value()),
        other => panic!("unexpected link extensions {other:?}"),
    };
    let Some(NetSlice::Ipv4(ip)) = &s.net else { panic!("not IPv4: {:?}", s.net) };
    let ip_header = ip.header();
    assert_eq!(ip_header.ihl(), 5);
    assert_eq!(ip_header.protocol(), etherparse::IpNumber::UDP);
    assert_eq!(ip_header.to_header().calc_header_checksum(), ip_header.header_checksum(), "IPv4 header checksum");
    assert_eq!(usize::from(ip_header.total_len()), frame.len() - 14 - 4 * usize::from(vlan.is_some()));
    let Some(TransportSlice::Udp(udp)) = &s.transport else { panic!("not UDP: {:?}", s.transport) };
    assert_ne!(udp.checksum(), 0, "the UDP checksum is filled in");
    let expected =
        udp.to_header().calc_checksum_ipv4_raw(ip_header.source(), ip_header.destination(), udp.payload()).unwrap();
    assert_eq!(udp.checksum(), expected, "UDP checksum");
    assert_eq!(usize::from(udp.length()), 8 + udp.payload().len());
    Decoded {
        vlan,
        src: ip_header.source(),
        dst: ip_header.destination(),
        sport: udp.source_port(),
        dport: udp.destination_port(),
        payload_at: frame.len() - udp.payload().len(),
    }
}

#[test]
fn every_template_and_format_generates_a_clean_trace() {
    let dir = tmp_dir("all");
    let n = 500u32;
    for t in TEMPLATES {
        for f in FORMATS {
            let path = dir.join(file_name(t, f));
            let info = trace::generate(&Generated::new(t, n, f), &path).unwrap();
            assert_eq!(info.path, path);
            assert_eq!(info.probes, n);
            assert_eq!(info.bytes, std::fs::metadata(&path).unwrap().len());
            assert_eq!(info.sha256, digest::sha256_file(&path).unwrap());
            assert_eq!(latency_proto::pcap::count_packets(&path).unwrap(), u64::from(n));

            let insp = trace::inspect(&path, f).unwrap();
            assert_eq!(insp.packets, u64::from(n), "{t:?} {f:?}");
            assert_eq!(insp.probes, u64::from(n));
            assert_eq!(insp.non_probes, 0);
            assert_eq!(insp.unique_ids, u64::from(n));
            assert_eq!((insp.duplicate_ids, insp.duplicates.len()), (0, 0));
            assert_eq!((insp.min_id, insp.max_id), (Some(1), Some(u64::from(n))));
            assert_eq!((insp.gaps, insp.missing.len()), (0, 0));
            assert_eq!(insp.tagged, 0);
            assert!(insp.strictly_increasing);
            let len = if t == TraceTemplate::RemoveHeader { 132 } else { 128 };
            assert_eq!((insp.frame_len_min, insp.frame_len_max), (Some(len), Some(len)));
            let other = if f == ProbeFormat::Latencylab { "compact" } else { "latencylab" };
            assert_eq!(insp.formats[f.name()], u64::from(n));
            assert_eq!(insp.formats[other], 0);
            assert!(insp.problems().is_empty(), "{:?}", insp.problems());

            // Read as the other format, nothing is a probe, and the problems say why.
            let wrong = trace::inspect(&path, other.parse().unwrap()).unwrap();
            assert_eq!((wrong.probes, wrong.non_probes), (0, u64::from(n)));
            let problems = wrong.problems();
            assert!(
                problems.iter().any(|p| p.contains(&format!("no packet carries a {other} probe id"))),
                "{problems:?}"
            );
            assert!(problems.iter().any(|p| p.contains(f.name())), "{problems:?}");

            // The JSON form has the fields a report or a CLI prints.
            let json = serde_json::to_value(&insp).unwrap();
            assert_eq!(json["packets"], u64::from(n));
            assert_eq!(serde_json::to_value(&info).unwrap()["sha256"], info.sha256.as_str());
        }
    }
}

#[test]
fn headers_and_checksums_are_valid_and_the_probe_opens_the_udp_payload() {
    let dir = tmp_dir("headers");
    for t in TEMPLATES {
        for f in FORMATS {
            let path = dir.join(file_name(t, f));
            trace::generate(&Generated::new(t, 100, f), &path).unwrap();
            let (header, pkts) = packets(&path);
            assert_eq!(header.ts_resolution, TsResolution::NanoSecond);
            assert_eq!(header.datalink, pcap_file::DataLink::ETHERNET);
            for (i, (ts, frame)) in pkts.iter().enumerate() {
                let id = i as u64 + 1;
                assert_eq!(*ts, Duration::from_millis(2 * id), "timestamps are id × 2 ms");
                let d = decode(frame);
                assert_eq!(&frame[..6], &[0xff; 6], "broadcast destination MAC");
                assert_eq!(d.vlan, (t == TraceTemplate::RemoveHeader).then_some(100));
                let (at, p) = probe::locate(frame, f).unwrap();
                assert_eq!(p, Probe { id, tag: None });
                assert_eq!(at, d.payload_at, "{t:?} {f:?}: the probe starts the UDP payload");
                assert_eq!(d.src, [10, 0, 0, 100]);
                assert_eq!(d.sport, 4000);
                if t == TraceTemplate::FiveTuple {
                    // Entries of five_tuple.tbl: 10.0.0.100:4000 -> 10.0.0.k:(4999 + k), k = 1..4.
                    assert!((1..=4).contains(&d.dst[3]) && d.dst[..3] == [10, 0, 0]);
                    assert_eq!(d.dport, 4999 + u16::from(d.dst[3]));
                } else if t != TraceTemplate::Forward {
                    // Entries of forward.tbl: 10.0.0.1 .. 10.0.0.7.
                    assert!(d.dst[..3] == [10, 0, 0] && (1..=7).contains(&d.dst[3]), "{:?}", d.dst);
                }
            }
        }
    }
}

#[test]
fn forward_traces_address_exactly_the_unforwarded_ids_to_missing_destinations() {
    let dir = tmp_dir("forward");
    let n = 1000u32;
    for f in FORMATS {
        let path = dir.join(file_name(TraceTemplate::Forward, f));
        trace::generate(&Generated::new(TraceTemplate::Forward, n, f), &path).unwrap();
        let mut missed = BTreeSet::new();
        for (_, frame) in packets(&path).1 {
            let d = decode(&frame);
            let id = probe::parse(&frame, f).unwrap().id;
            match d.dst {
                [10, 0, 0, 1..=7] => {}
                [10, 0, 1, _] => {
                    missed.insert(id);
                }
                other => panic!("probe {id} to {other:?}, neither a hit nor a 10.0.1.x miss"),
            }
        }
        let expected: BTreeSet<u64> =
            probes::ids(u64::from(n)).filter(|&i| !probes::forwarded(TraceTemplate::Forward, i)).collect();
        assert_eq!(missed, expected);
        assert_eq!(missed.len() * 10, n as usize * 3, "30 % of the probes miss the table");
    }
}

#[test]
fn generation_is_deterministic_and_never_overwrites() {
    let dir = tmp_dir("determinism");
    for t in TEMPLATES {
        for f in FORMATS {
            let a = dir.join(format!("a-{}", file_name(t, f)));
            let b = dir.join(format!("b-{}", file_name(t, f)));
            let ia = trace::generate(&Generated::new(t, 300, f), &a).unwrap();
            let ib = trace::generate(&Generated::new(t, 300, f), &b).unwrap();
            assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap(), "{t:?} {f:?}");
            assert_eq!(ia.sha256, ib.sha256);
            assert_eq!(ia.bytes, ib.bytes);
        }
    }
    // Different inputs give different files.
    let forward =
        trace::generate(&Generated::new(TraceTemplate::Forward, 10, ProbeFormat::Compact), &dir.join("f.pcap"))
            .unwrap();
    let checksum =
        trace::generate(&Generated::new(TraceTemplate::Checksum, 10, ProbeFormat::Compact), &dir.join("c.pcap"))
            .unwrap();
    assert_ne!(forward.sha256, checksum.sha256);

    let existing = dir.join("f.pcap");
    let before = std::fs::read(&existing).unwrap();
    let err =
        trace::generate(&Generated::new(TraceTemplate::Forward, 20, ProbeFormat::Latencylab), &existing).unwrap_err();
    assert!(err.to_string().contains(&existing.display().to_string()), "{err}");
    assert_eq!(std::fs::read(&existing).unwrap(), before);
}

/// A hand-built microsecond, big-endian pcap (unlike the generator's) holding probes 1, 2, 2, 5,
/// a packet without a probe and one carrying the other format's probe.
fn hand_built(path: &Path) {
    let header =
        PcapHeader { ts_resolution: TsResolution::MicroSecond, endianness: Endianness::Big, ..Default::default() };
    let mut w = PcapWriter::with_header(Vec::new(), header).unwrap();
    let wire = probe::ProbeFormat::Latencylab;
    let mut frames: Vec<Vec<u8>> = [1, 2, 2, 5]
        .iter()
        .map(|&id| trace::frame(&Generated::new(TraceTemplate::Checksum, 1, wire), id).unwrap())
        .collect();
    let mut not_a_probe = trace::frame(&Generated::new(TraceTemplate::Checksum, 1, wire), 3).unwrap();
    let at = probe::locate(&not_a_probe, wire).unwrap().0;
    not_a_probe[at..at + 12].copy_from_slice(b"hello, world");
    assert_eq!(probe::parse(&not_a_probe, wire), None);
    frames.insert(3, not_a_probe);
    frames.push(trace::frame(&Generated::new(TraceTemplate::Checksum, 1, probe::ProbeFormat::Compact), 4).unwrap());
    for (i, f) in frames.iter().enumerate() {
        w.write_packet(&PcapPacket::new(Duration::from_micros(i as u64 * 2000), f.len() as u32, f)).unwrap();
    }
    std::fs::write(path, w.into_writer()).unwrap();
}

#[test]
fn inspection_reports_a_duplicated_id_and_a_non_probe_packet() {
    let dir = tmp_dir("inspect");
    let path = dir.join("hand.pcap");
    hand_built(&path);
    let insp = trace::inspect(&path, ProbeFormat::Latencylab).unwrap();
    assert_eq!(insp.packets, 6);
    assert_eq!(insp.probes, 4);
    assert_eq!(insp.non_probes, 2);
    assert_eq!(insp.unique_ids, 3);
    assert_eq!(insp.duplicate_ids, 1);
    assert_eq!(insp.duplicates, [2]);
    assert_eq!((insp.min_id, insp.max_id), (Some(1), Some(5)));
    assert_eq!((insp.gaps, insp.missing.as_slice()), (2, &[3, 4][..]));
    assert!(!insp.strictly_increasing);
    assert_eq!(insp.formats["latencylab"], 4);
    assert_eq!(insp.formats["compact"], 1);
    let problems = insp.problems();
    assert_eq!(
        problems,
        [
            "2 of 6 packets carry no latencylab probe id",
            "1 packets carry a compact probe id, but the trace is read as latencylab",
            "1 probes repeat an id seen before (ids 2)",
            "2 ids are missing between 1 and 5 (ids 3, 4)",
        ]
    );
}

#[test]
fn inspection_counts_tagged_probes() {
    let dir = tmp_dir("tagged");
    let header = PcapHeader { ts_resolution: TsResolution::NanoSecond, ..Default::default() };
    let mut w = PcapWriter::with_header(Vec::new(), header).unwrap();
    for (id, tag) in [(1, probe::TAG_PIPELINE), (1, probe::TAG_BYPASS)] {
        let mut f = trace::frame(&Generated::new(TraceTemplate::Forward, 1, probe::ProbeFormat::Compact), id).unwrap();
        assert!(probe::set_tag(&mut f, probe::ProbeFormat::Compact, tag));
        w.write_packet(&PcapPacket::new(Duration::ZERO, f.len() as u32, &f)).unwrap();
    }
    let path = dir.join("reflected.pcap");
    std::fs::write(&path, w.into_writer()).unwrap();
    let insp = trace::inspect(&path, ProbeFormat::Compact).unwrap();
    assert_eq!((insp.probes, insp.tagged, insp.duplicate_ids), (2, 2, 1));
    assert!(insp.problems().iter().any(|p| p.contains("2 probes are already tagged")), "{:?}", insp.problems());
}

#[test]
fn inspection_errors_name_the_file() {
    let dir = tmp_dir("errors");
    let missing = dir.join("missing.pcap");
    let err = trace::inspect(&missing, ProbeFormat::Latencylab).unwrap_err();
    assert!(matches!(err, TraceError::Io { .. }), "{err:?}");
    assert!(err.to_string().starts_with(&missing.display().to_string()), "{err}");

    let bogus = dir.join("bogus.pcap");
    std::fs::write(&bogus, b"this is not a capture file at all").unwrap();
    let err = trace::inspect(&bogus, ProbeFormat::Latencylab).unwrap_err();
    assert!(matches!(err, TraceError::Pcap { .. }), "{err:?}");
    assert!(err.to_string().starts_with(&bogus.display().to_string()), "{err}");

    // A capture cut short in its last record says where, and how much was read.
    let whole = dir.join("whole.pcap");
    trace::generate(&Generated::new(TraceTemplate::Forward, 5, ProbeFormat::Latencylab), &whole).unwrap();
    let bytes = std::fs::read(&whole).unwrap();
    let cut = dir.join("cut.pcap");
    std::fs::write(&cut, &bytes[..bytes.len() - 1]).unwrap();
    let err = trace::inspect(&cut, ProbeFormat::Latencylab).unwrap_err();
    let last = 24 + 4 * (16 + trace::FRAME_LEN);
    assert_eq!(
        err.to_string(),
        format!(
            "{}: truncated at byte {last}: record 5 has {} of its {} bytes (4 complete records read)",
            cut.display(),
            16 + trace::FRAME_LEN - 1,
            16 + trace::FRAME_LEN
        )
    );
    assert!(latency_proto::pcap::count_packets(&cut).is_err(), "a truncated trace is not counted");

    // A trace of no probes is not generated.
    let empty = dir.join("empty.pcap");
    let err = trace::generate(&Generated::new(TraceTemplate::Checksum, 0, ProbeFormat::Compact), &empty).unwrap_err();
    assert!(matches!(err, TraceError::NoProbes { .. }), "{err:?}");
    assert!(!empty.exists());

    // An empty capture (header only) is readable, and its problem is said.
    let header = PcapHeader { ts_resolution: TsResolution::NanoSecond, ..Default::default() };
    std::fs::write(&empty, PcapWriter::with_header(Vec::new(), header).unwrap().into_writer()).unwrap();
    let insp = trace::inspect(&empty, ProbeFormat::Compact).unwrap();
    assert_eq!((insp.packets, insp.min_id, insp.frame_len_min), (0, None, None));
    assert_eq!(insp.problems(), ["the trace holds no packets"]);
}

#[test]
fn tcpdump_reads_generated_traces() {
    let Some(tcpdump) = ["/usr/bin/tcpdump", "/usr/sbin/tcpdump"].into_iter().find(|p| Path::new(p).exists()) else {
        runs_here(false, "tcpdump (apt-get install tcpdump)");
        return;
    };
    let dir = tmp_dir("tcpdump");
    for t in TEMPLATES {
        for f in FORMATS {
            let path = dir.join(file_name(t, f));
            trace::generate(&Generated::new(t, 20, f), &path).unwrap();
            let out =
                std::process::Command::new(tcpdump).arg("-r").arg(&path).args(["-c", "3", "-nn"]).output().unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success(), "{t:?} {f:?}: {}\n{stdout}", String::from_utf8_lossy(&out.stderr));
            let lines: Vec<&str> = stdout.lines().collect();
            assert_eq!(lines.len(), 3, "{stdout}");
            assert!(lines.iter().all(|l| l.contains("10.0.0.100.4000 > ") && l.contains("UDP")), "{stdout}");
            if t == TraceTemplate::RemoveHeader {
                // tcpdump prints the tag only with -e.
                let out = std::process::Command::new(tcpdump)
                    .arg("-r")
                    .arg(&path)
                    .args(["-c", "1", "-nn", "-e"])
                    .output()
                    .unwrap();
                assert!(String::from_utf8_lossy(&out.stdout).contains("vlan 100"), "{out:?}");
            }
        }
    }
}

/// Check, with scapy (an independent reader), every frame of the pcaps given as arguments: its
/// length; the IPv4, UDP and TCP checksums (over IPv4 or IPv6) recomputed by scapy against those
/// in the file; and, in frames marked as INT (DSCP 0x17 over UDP/TCP, GRE protocol 0x88B5), the
/// INT-MD stack read field by field as the INT v2.1 specification lays it out. Prints
/// `path frames length-min length-max bad-checksums int-frames-with-one-hop`.
const SCAPY_CHECK: &str = r#"
import sys
from scapy.all import GRE, IP, IPv6, TCP, UDP, Ether, rdpcap

# Words per hop of each instruction bit (bit 0 = most significant): node id, level-1 port ids, hop
# latency, queue id and occupancy, ingress timestamp (2), egress timestamp (2), level-2 port ids
# (2), egress port tx utilisation, buffer id and occupancy.
WORDS = {0: 1, 1: 1, 2: 1, 3: 1, 4: 2, 5: 2, 6: 2, 7: 1, 8: 1}

def int_md(raw):
    """Hops of a valid INT-MD stack at the start of raw (shim first), and what follows it."""
    assert raw[0] >> 4 == 1, "shim type INT-MD"
    words = raw[1]
    assert raw[4] >> 4 == 2, "INT-MD version 2"
    hop_ml, remaining = raw[6] & 0x1F, raw[7]
    bitmap = raw[8] << 8 | raw[9]
    assert hop_ml == sum(w for bit, w in WORDS.items() if bitmap & (0x8000 >> bit)), "hop ML matches the bitmap"
    stack = 4 * words - 16
    assert stack > 0 and stack % (4 * hop_ml) == 0, "whole hops"
    hops = stack // (4 * hop_ml)
    assert hops + remaining == 8, (hops, remaining)
    return hops, raw[4 * words:]

def checked(layers, f):
    bad = 0
    for layer in layers:
        stated = layer.chksum
        del layer.chksum
        if Ether(bytes(f))[type(layer)].chksum != stated:
            bad += 1
        layer.chksum = stated
    return bad

for path in sys.argv[1:]:
    frames = rdpcap(path)
    bad = one_hop = 0
    for f in frames:
        if GRE in f and f[GRE].proto == 0x88B5:
            hops, rest = int_md(bytes(f[GRE].payload))
            inner = IP(rest)
            l4 = inner[UDP] if UDP in inner else inner[TCP]
            assert b"oct-fpga-id:" in bytes(l4.payload)
            # The inner packet's checksums, recomputed by scapy on the packet alone.
            for layer in (inner, l4):
                stated = layer.chksum
                del layer.chksum
                bad += IP(bytes(inner))[type(layer)].chksum != stated
                layer.chksum = stated
            bad += checked([f[IP]], f)
            one_hop += hops == 1
            continue
        l4 = f[UDP] if UDP in f else f[TCP]
        if IP in f and f[IP].tos >> 2 == 0x17:
            hops, rest = int_md(bytes(l4.payload))
            assert b"oct-fpga-id:" in rest
            one_hop += hops == 1
        bad += checked([l4] + ([f[IP]] if IP in f else []), f)
    lengths = [len(bytes(f)) for f in frames]
    print(path, len(frames), min(lengths), max(lengths), bad, one_hop)
"#;

#[test]
fn scapy_reads_the_asked_frame_sizes_with_valid_checksums_and_int_stacks() {
    let Some(python) = test_python() else { return };
    let dir = tmp_dir("frame-sizes");
    let mut cases = Vec::new();
    let plain =
        [("forward", "none", 64), ("forward", "none", 1518), ("checksum", "7", 512), ("remove_header", "100", 256)];
    let traffic = [
        ("checksum", "none", 200, "ipv6", "tcp"),
        ("remove_header", "100", 300, "ipv6", "udp"),
        ("five_tuple", "none", 90, "ipv4", "tcp"),
        ("int", "none", 128, "ipv4", "udp"),
        ("int", "none", 512, "ipv4", "tcp"),
        ("int_gre", "none", 256, "ipv4", "udp"),
        ("int_gre", "9", 1500, "ipv4", "tcp"),
    ];
    let all = plain.iter().map(|&(t, v, s)| (t, v, s, "ipv4", "udp")).chain(traffic);
    for (template, vlan, size, ip, transport) in all {
        let out = dir.join(format!("{template}-{size}-{ip}-{transport}.pcap"));
        let size_arg = size.to_string();
        let o = orchestrate(&[
            "trace",
            "generate",
            "--template",
            template,
            "--count",
            "300",
            "--frame-size",
            &size_arg,
            "--vlan",
            vlan,
            "--ip",
            ip,
            "--transport",
            transport,
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        cases.push((out, size, if template.starts_with("int") { 300 } else { 0 }));
    }
    let o = std::process::Command::new(python)
        .arg("-c")
        .arg(SCAPY_CHECK)
        .args(cases.iter().map(|(p, ..)| p))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let lines: Vec<String> = String::from_utf8_lossy(&o.stdout).lines().map(str::to_owned).collect();
    for ((path, size, int), line) in cases.iter().zip(&lines) {
        assert_eq!(line, &format!("{} 300 {size} {size} 0 {int}", path.display()));
    }
    assert_eq!(lines.len(), cases.len());
    // IPv6 where the template's program reads IPv4 only is refused, naming the flag.
    let o = orchestrate(&["trace", "generate", "--template", "int", "--count", "3", "--ip", "ipv6", "--out", "x.pcap"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--ip ipv6: template `int` is IPv4 traffic"));
}

/// A classic pcap written byte by byte (little-endian): ns stamps when `nanos` (else µs), the
/// file's link type, and each record as (seconds, fraction, captured bytes, original length).
fn raw_pcap(nanos: bool, link_type: u32, records: &[(u32, u32, Vec<u8>, u32)]) -> Vec<u8> {
    let magic: u32 = if nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 };
    let mut b = Vec::new();
    for word in [magic, 0x0004_0002, 0, 0, 65_535, link_type] {
        b.extend_from_slice(&word.to_le_bytes());
    }
    for (secs, fraction, data, orig) in records {
        for word in [*secs, *fraction, data.len() as u32, *orig] {
            b.extend_from_slice(&word.to_le_bytes());
        }
        b.extend_from_slice(data);
    }
    b
}

/// Probe `id` of a forward trace, as the generator makes it.
fn probe_frame(id: u64) -> Vec<u8> {
    trace::frame(&Generated::new(TraceTemplate::Forward, 400, ProbeFormat::Latencylab), id).unwrap()
}

/// Records of probes 1..=n stamped `ns(i)` (ns from 0), whole frames, in a nanosecond pcap.
fn stamped(n: u64, ns: impl Fn(u64) -> u64) -> Vec<u8> {
    let records: Vec<_> = (1..=n)
        .map(|id| {
            let (t, f) = (ns(id), probe_frame(id));
            ((t / 1_000_000_000) as u32, (t % 1_000_000_000) as u32, f.clone(), f.len() as u32)
        })
        .collect();
    raw_pcap(true, 1, &records)
}

/// A plan in `dir` replaying the pcap `file` (in `dir`) as trace `t` (its source at line 6), with
/// the bitstreams of the repository.
fn pcap_plan(dir: &Path, file: &str, protocol: &str) -> std::path::PathBuf {
    let bitstreams = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().join("bitstreams");
    let text = format!(
        "study: pcap-plan\ntestbed: sim\nprotocol: {protocol}\ntraces:\n  t:\n    pcap: {file}\nprograms:\n  - name: \
         forward\n    bitstream: {b}/forward.yaml\n    trace: t\n    \"null\": {b}/golden_nic.yaml\nreport:\n  \
         formats: [markdown]\n",
        b = bitstreams.display()
    );
    let path = dir.join(format!("{file}.yaml"));
    std::fs::write(&path, text).unwrap();
    path
}

const PPS: &str = "{ sessions: 1, runs: 2, pacing_pps: 500, idle_gap_s: 0, seed: 1 }";
const TRACE_TIMED: &str = "{ sessions: 1, runs: 2, timing: trace, idle_gap_s: 0, seed: 1 }";

/// What a replay cannot send faithfully is refused by `validate` (at the plan's `pcap:`) and by
/// `trace inspect`, naming the file, the record and what is wrong: a link type other than
/// Ethernet, a record holding more than its frame, a time stamp's fraction of a second not below
/// a second, a frame longer than the largest a probe trace may hold.
#[test]
fn pcap_records_a_replay_cannot_send_are_refused_with_their_record() {
    let dir = tmp_dir("pcap-defects");
    let good = |id: u64| {
        let f = probe_frame(id);
        (0, id as u32 * 2_000_000, f.clone(), f.len() as u32)
    };
    let mut captured_beyond = good(2);
    captured_beyond.3 = 100;
    let mut oversized = good(2);
    oversized.2.resize(9300, 0);
    oversized.3 = 9300;
    let ns_fraction = |id: u64| (id as u32, 1_000_000_000, probe_frame(id), probe_frame(id).len() as u32);
    let us_fraction = (9, 1_000_000, probe_frame(3), probe_frame(3).len() as u32);
    let cases: [(&str, Vec<u8>, &str); 5] = [
        (
            "raw-ip.pcap",
            raw_pcap(true, 101, &[good(1), good(2), good(3)]),
            "the file's link type is 101, not Ethernet (1): a replay sends every record as an Ethernet frame",
        ),
        (
            "beyond.pcap",
            raw_pcap(true, 1, &[good(1), captured_beyond, good(3)]),
            "record 2: 128 bytes captured of a frame of 100 bytes (a record cannot hold more than its frame)",
        ),
        (
            "ns-fraction.pcap",
            raw_pcap(true, 1, &[good(1), ns_fraction(2), ns_fraction(3), ns_fraction(4)]),
            "record 2 and 2 more: time stamp fraction 1000000000 ns is not below a second (10^9 ns)",
        ),
        (
            "us-fraction.pcap",
            raw_pcap(false, 1, &[(0, 1, probe_frame(1), 128), (0, 2, probe_frame(2), 128), us_fraction]),
            "record 3: time stamp fraction 1000000 µs is not below a second (10^6 µs)",
        ),
        (
            "jumbo.pcap",
            raw_pcap(true, 1, &[good(1), oversized, good(3)]),
            "record 2: a frame of 9300 bytes, longer than 9216 bytes, the largest a probe trace may hold",
        ),
    ];
    for (file, bytes, problem) in cases {
        let pcap = dir.join(file);
        std::fs::write(&pcap, bytes).unwrap();
        let plan = pcap_plan(&dir, file, PPS);
        let o = orchestrate(&["validate", plan.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(2), "{file}: {}", crate::common::stderr(&o));
        assert_eq!(
            crate::common::stderr(&o),
            format!("{}:6:11: {}: {problem}\n1 problem found\n", plan.display(), pcap.display()),
            "{file}"
        );
        let o = orchestrate(&["trace", "inspect", pcap.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(1), "{file}: {}", crate::common::stderr(&o));
        assert_eq!(crate::common::stderr(&o), format!("{}: {problem}\n", pcap.display()), "{file}");
    }
    // The same records, sound, validate.
    std::fs::write(dir.join("sound.pcap"), raw_pcap(true, 1, &[good(1), good(2), good(3)])).unwrap();
    let o = orchestrate(&["validate", pcap_plan(&dir, "sound.pcap", PPS).to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", crate::common::stderr(&o));
    std::fs::remove_dir_all(dir).unwrap();
}

/// A pcap replayed at its own timing (`timing: trace`) needs time stamps that go forward:
/// `validate` refuses what `plan` refuses, both at the trace's position in the plan and saying
/// what is wrong with the stamps; under `pacing_pps` the stamps do not matter.
#[test]
fn a_trace_timed_pcap_whose_stamps_go_back_is_refused_by_validate_and_plan_alike() {
    let dir = tmp_dir("stamps");
    let cases: [(&str, Vec<u8>, &str); 3] = [
        (
            "back.pcap",
            stamped(3, |id| [0, 5_000_000, 3_000_000][id as usize - 1]),
            "record 3 is stamped 2 ms before record 2: with `timing: trace` the time stamps pace the replay, so they \
             must not go back",
        ),
        (
            "instant.pcap",
            stamped(3, |_| 7_000_000_000),
            "its 3 packets are all stamped at one instant: with `timing: trace` there are no gaps to replay",
        ),
        ("single.pcap", stamped(1, |_| 0), "it holds one packet: with `timing: trace` there are no gaps to replay"),
    ];
    for (file, bytes, problem) in cases {
        let pcap = dir.join(file);
        std::fs::write(&pcap, bytes).unwrap();
        let plan = pcap_plan(&dir, file, TRACE_TIMED);
        let expected = format!("{}:6:5: trace `t` ({}): {problem}\n1 problem found\n", plan.display(), pcap.display());
        for command in ["validate", "plan"] {
            let o = orchestrate(&[command, plan.to_str().unwrap()]);
            assert_eq!(o.status.code(), Some(2), "{command} {file}: {}", crate::common::stderr(&o));
            assert_eq!(crate::common::stderr(&o), expected, "{command} {file}");
        }
        let o = orchestrate(&["validate", pcap_plan(&dir, file, PPS).to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(0), "{file} under pacing_pps: {}", crate::common::stderr(&o));
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// A trace slower than one packet a second is replayed, and predicted, at its own rate: 400
/// probes 9.9 s apart take 3,960 s (399 gaps at 1/0.10101 s, counted per probe), not the 400 s of
/// a rate clamped to 1 pps, and the simulated replay sends them at 0.101 pps.
#[test]
fn a_pcap_slower_than_one_packet_a_second_keeps_its_timing() {
    let dir = tmp_dir("slow-pcap");
    std::fs::write(dir.join("slow.pcap"), stamped(400, |id| (id - 1) * 9_900_000_000)).unwrap();
    let plan = pcap_plan(&dir, "slow.pcap", TRACE_TIMED);
    let o = orchestrate(&["plan", plan.to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", crate::common::stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rate = 399.0 / (399.0 * 9.9);
    for run in v["sessions"][0]["runs"].as_array().unwrap() {
        assert!((run["pacing_pps"].as_f64().unwrap() - rate).abs() < 1e-9, "{run}");
        assert!((run["replay_s"].as_f64().unwrap() - 3960.0).abs() < 1e-6, "{run}");
    }
    // Two runs of the program and two of its null calibration.
    assert!((v["predicted_seconds"]["replay"].as_f64().unwrap() - 4.0 * 3960.0).abs() < 1e-6, "{v}");
    let o = orchestrate(&["plan", plan.to_str().unwrap()]);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("run 1 (3960 s replay)"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );

    let out = crate::common::tmp("slow-pcap-run");
    let o = orchestrate(&["run", plan.to_str().unwrap(), "--out", out.to_str().unwrap(), "--quiet"]);
    assert_eq!(o.status.code(), Some(0), "{}", crate::common::stderr(&o));
    let journal = latency_results::journal::read(&out.join("journal.jsonl")).unwrap();
    let mut finished = 0;
    for e in &journal {
        if let latency_results::event::Event::RunFinished { pacing, .. } = &e.event {
            let pps = pacing.receiver_pps.unwrap();
            assert!((pps / rate - 1.0).abs() < 0.01, "{pps} pps seen by the receiver, not {rate}");
            finished += 1;
        }
    }
    assert_eq!(finished, 4);
    std::fs::remove_dir_all(out).unwrap();
    std::fs::remove_dir_all(dir).unwrap();
}
