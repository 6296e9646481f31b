//! The drop counters of an AF_PACKET ring and of an AF_XDP socket on real ones: a veth pair in a
//! private network namespace, more frames sent than the ring holds while nobody polls it. The
//! test binary runs its inner halves
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
fn a_full_af_xdp_ring_counts_the_frames_it_dropped() {
    inside_a_namespace("ring::af_xdp_inside_the_namespace");
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
    let mut got = 0u64;
    while ring.poll(1024, &mut |_, _| got += 1) > 0 {}
    assert_eq!(got, 8192, "the ring holds 8,192 frames");
    assert_eq!(got + drops, SENT, "every frame sent was either in the ring or counted as dropped");
    assert_eq!(ring.drops().unwrap(), 0, "reading the counter resets it");
}

#[test]
#[ignore = "run inside its network namespace by a_full_af_xdp_ring_counts_the_frames_it_dropped"]
fn af_xdp_inside_the_namespace() {
    let mut xsk = XdpSocket::open("r0", None).unwrap();
    assert_eq!(xsk.drops().unwrap(), 0, "a new socket has dropped nothing");
    send_in_bursts();
    let drops = xsk.drops().unwrap();
    let mut got = 0u64;
    while xsk.poll(1024, &mut |_, _| got += 1) > 0 {}
    assert_eq!(got, 4096, "the RX ring holds 4,096 frames");
    assert_eq!(got + drops, SENT, "every frame sent was either in the ring or counted as dropped");
    assert_eq!(xsk.drops().unwrap(), 0, "only new drops are counted");
}

/// Send `SENT` frames on s0 in small bursts, so that the veth's backlog never overflows: only the
/// ring may drop.
fn send_in_bursts() {
    let tx = PacketSender::open("s0").unwrap();
    let f = frame(b"oct-fpga-id:1");
    for k in 0..SENT {
        tx.send(&f).unwrap();
        if k % 200 == 199 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    std::thread::sleep(Duration::from_millis(200));
}
