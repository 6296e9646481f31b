//! The drop counters of an AF_PACKET ring and of an AF_XDP socket on real ones: a veth pair in a
//! private network namespace, more frames sent than the ring holds while nobody polls it; then
//! every frame handed over once, in order, with stamps that never go back, across small polls
//! and the ring's wrap. The test binary runs its inner halves
//! inside the namespace (`ip netns exec`), so no namespace code runs in the test itself. Needs
//! root and `ip`; skipped with a notice elsewhere unless CI is set.

use std::process::Command;
use std::time::Duration;

use latency_sys::af_packet::{PacketRing, PacketSender};
use latency_sys::af_xdp::XdpSocket;

use crate::common::{Netns, frame, runs_as_root_with};

/// Frames sent: more than the ring's 8,192 slots (16 blocks of 1 MiB, 2 KiB frames).
const SENT: u64 = 9000;

#[test]
fn a_full_af_packet_ring_counts_the_frames_it_dropped() {
    inside_a_namespace("ring::inside_the_namespace");
}

#[test]
fn an_af_packet_ring_fitted_to_short_frames_holds_more_and_counts_longer_ones_as_dropped() {
    inside_a_namespace("ring::fitted_inside_the_namespace");
}

#[test]
fn a_full_af_xdp_ring_counts_the_frames_it_dropped() {
    inside_a_namespace("ring::af_xdp_inside_the_namespace");
}

#[test]
fn an_af_packet_ring_stamps_each_frame_when_the_kernel_received_it_if_asked() {
    inside_a_namespace("ring::arrival_inside_the_namespace");
}

/// Run the ignored test `inner` of this binary in a new namespace with veth pairs.
fn inside_a_namespace(inner: &str) {
    if !runs_as_root_with(&["ip"]) {
        return;
    }
    let ns = Netns::new(&format!("agent-{}", inner.replace([':', '_'], "-")));
    let o = Command::new("ip")
        .args(["netns", "exec", &ns.0])
        .arg(std::env::current_exe().unwrap())
        .args([inner, "--exact", "--ignored", "--nocapture"])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success() && out.contains("1 passed"), "{out}{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
#[ignore = "run inside its network namespace by a_full_af_packet_ring_counts_the_frames_it_dropped"]
fn inside_the_namespace() {
    let mut ring = PacketRing::open("r0", false).unwrap();
    assert_eq!(ring.drops().unwrap(), 0, "a new ring has dropped nothing");
    send_in_bursts();
    let drops = ring.drops().unwrap();
    let mut got = Handed::default();
    while ring.poll(1024, |f, tsc| got.take(f, tsc)) > 0 {}
    assert_eq!(got.ids, (1..=8192).collect::<Vec<_>>(), "the ring holds 8,192 frames, handed over in order");
    assert_eq!(got.ids.len() as u64 + drops, SENT, "every frame sent was either in the ring or counted as dropped");
    assert_eq!(ring.drops().unwrap(), 0, "reading the counter resets it");
    wraps_in_order(8192, |got| ring.poll(7, |f, tsc| got.take(f, tsc)));
}

/// A ring asked to hold frames of 100 bytes: its slots are 192 bytes (the frame at 66, rounded up
/// to whole cache lines), so it holds frames of up to 126 bytes whole, 16 blocks of 85 × 64 slots
/// (87,040). Frames of 126 bytes and less are handed over whole; longer ones, which the kernel
/// cuts, are not, and count as dropped. It holds the 9,000 frames that overflow a ring of 2 KiB
/// slots, and wraps in order.
#[test]
#[ignore = "run inside its network namespace by an_af_packet_ring_fitted_to_short_frames_holds_more_and_counts_longer_ones_as_dropped"]
fn fitted_inside_the_namespace() {
    let mut ring = PacketRing::open_fitting("r0", false, 100).unwrap();
    assert_eq!(ring.longest_frame(), 126);
    let tx = PacketSender::open("s0").unwrap();
    let lens = [64, 126, 127, 100, 1500, 125, 200, 126];
    let mut sent = Vec::new();
    for (k, &len) in lens.iter().enumerate() {
        let mut f = frame(format!("oct-fpga-id:{}", k + 1).as_bytes());
        f.resize(len, 0);
        tx.send(&f).unwrap();
        sent.push(f);
    }
    std::thread::sleep(Duration::from_millis(50));
    let mut handed = Vec::new();
    while ring.poll(1024, |f, _| handed.push(f.to_vec())) > 0 {}
    let whole: Vec<Vec<u8>> = sent.iter().filter(|f| f.len() <= 126).cloned().collect();
    assert_eq!(handed, whole, "the frames that fit, whole and in order");
    assert_eq!(ring.drops().unwrap(), 3, "the frames of 127, 1,500 and 200 bytes");
    assert_eq!(ring.drops().unwrap(), 0, "reading the counter resets it");
    send_in_bursts();
    assert_eq!(ring.drops().unwrap(), 0, "9,000 frames fit");
    let mut got = Handed::default();
    while ring.poll(1024, |f, tsc| got.take(f, tsc)) > 0 {}
    assert_eq!(got.ids, (1..=SENT).collect::<Vec<_>>(), "every frame, in order");
    // The next slot is the 9,009th: the wrap comes 87,040 − 9,008 slots on.
    wraps_in_order(87_040 - SENT - lens.len() as u64, |got| ring.poll(7, |f, tsc| got.take(f, tsc)));
}

/// After a ring was drained, `slots` before its wrap (a full one: its next slot the first again):
/// `slots - 42` probes then 100 more, drained by polls of 7 frames, which end between two batches
/// of stamps, so that the ring wraps inside a batch. Every frame is handed over once, in order.
fn wraps_in_order(slots: u64, mut poll: impl FnMut(&mut Handed) -> usize) {
    let mut got = Handed::default();
    for (first, count) in [(0, slots - 42), (10_000, 100)] {
        send_in_bursts_of(count, first);
        while poll(&mut got) > 0 {}
    }
    let sent: Vec<u64> = (1..=slots - 42).chain(10_001..=10_100).collect();
    assert_eq!(got.ids, sent, "every frame once, in order, across polls and the ring's wrap");
}

/// Two rings on r0, one stamping frames when the kernel received them: ten probes sent 2 ms
/// apart, each right after a TSC read, then both rings polled 50 ms after the last. The poll's
/// stamps all come after the sleep; the kernel's are each within 1 ms after its probe's send
/// (veth delivers a frame within the send call), never before it, and never go back.
#[test]
#[ignore = "run inside its network namespace by an_af_packet_ring_stamps_each_frame_when_the_kernel_received_it_if_asked"]
fn arrival_inside_the_namespace() {
    let hz = latency_agent::tsc::measure_hz(100_000_000);
    let ms = |ticks: u64| ticks as f64 * 1e3 / hz;
    let mut polled = PacketRing::open("r0", false).unwrap();
    let mut arrived = PacketRing::open("r0", false).unwrap();
    arrived.stamp_at_arrival(hz);
    let tx = PacketSender::open("s0").unwrap();
    let sent: Vec<u64> = (1..=10)
        .map(|id| {
            let tsc = latency_sys::rdtsc_fenced();
            tx.send(&frame(format!("oct-fpga-id:{id}").as_bytes())).unwrap();
            std::thread::sleep(Duration::from_millis(2));
            tsc
        })
        .collect();
    std::thread::sleep(Duration::from_millis(50));
    let last_sent = *sent.last().unwrap();
    for (ring, name) in [(&mut polled, "poll"), (&mut arrived, "arrival")] {
        let mut got = Handed::default();
        let mut stamps = Vec::new();
        while ring.poll(1024, |f, tsc| {
            got.take(f, tsc);
            stamps.push(tsc);
        }) > 0
        {}
        assert_eq!(got.ids, (1..=10).collect::<Vec<_>>(), "{name}: every probe once, in order");
        for (k, (&stamp, &send)) in stamps.iter().zip(&sent).enumerate() {
            if name == "poll" {
                assert!(
                    ms(stamp.saturating_sub(last_sent)) >= 50.0,
                    "poll: probe {} stamped before the sleep ended",
                    k + 1
                );
            } else {
                assert!(
                    stamp >= send && ms(stamp - send) < 1.0,
                    "arrival: probe {} stamped {:.3} ms after its send",
                    k + 1,
                    (stamp as f64 - send as f64) * 1e3 / hz
                );
            }
        }
    }
}

/// What polls handed over: the frames' ids, their stamps checked never to go back.
#[derive(Default)]
struct Handed {
    ids: Vec<u64>,
    last_tsc: u64,
}

impl Handed {
    fn take(&mut self, frame: &[u8], tsc: u64) {
        let p = latency_proto::probe::parse(frame, latency_proto::probe::ProbeFormat::Latencylab).expect("a probe");
        assert!(tsc >= self.last_tsc, "stamp {tsc} of frame {} before the one of the frame before it", p.id);
        self.last_tsc = tsc;
        self.ids.push(p.id);
    }
}

#[test]
#[ignore = "run inside its network namespace by a_full_af_xdp_ring_counts_the_frames_it_dropped"]
fn af_xdp_inside_the_namespace() {
    let mut xsk = XdpSocket::open("r0", None).unwrap();
    assert_eq!(xsk.drops().unwrap(), 0, "a new socket has dropped nothing");
    send_in_bursts();
    let drops = xsk.drops().unwrap();
    let mut got = Handed::default();
    while xsk.poll(1024, |f, tsc| got.take(f, tsc)) > 0 {}
    assert_eq!(got.ids, (1..=4096).collect::<Vec<_>>(), "the RX ring holds 4,096 frames, handed over in order");
    assert_eq!(got.ids.len() as u64 + drops, SENT, "every frame sent was either in the ring or counted as dropped");
    assert_eq!(xsk.drops().unwrap(), 0, "only new drops are counted");
    wraps_in_order(4096, |got| xsk.poll(7, |f, tsc| got.take(f, tsc)));
}

/// Send `SENT` frames on s0 in small bursts, so that the veth's backlog never overflows: only the
/// ring may drop.
fn send_in_bursts() {
    send_in_bursts_of(SENT, 0);
}

/// Send `count` probes with ids `first + 1..=first + count` on s0 in small bursts.
fn send_in_bursts_of(count: u64, first: u64) {
    let tx = PacketSender::open("s0").unwrap();
    for k in 0..count {
        tx.send(&frame(format!("oct-fpga-id:{}", first + k + 1).as_bytes())).unwrap();
        if k % 200 == 199 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    std::thread::sleep(Duration::from_millis(200));
}
