//! `latency-agent originate` and `latency-agent reflect`: their arguments, and the commands that
//! open the ports and run [`latency_agent::rtt`].

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use latency_agent::capture::{KernelPort, RxPort};
use latency_agent::rtt::Originate;
use latency_agent::tsc;
use latency_proto::control::AgentEvent;
use latency_proto::probe::ProbeFormat;
use latency_sys::af_packet::PacketSender;

use super::{Backend, Failure, emit};

/// The port of `originate` and `reflect`.
#[derive(clap::Args)]
pub struct RttPort {
    /// Receive backend (the kernel's: these send through a packet socket).
    #[arg(long, value_enum, default_value = "af-packet")]
    backend: Backend,
    /// Interface.
    #[arg(long)]
    port: String,
    /// Probe id format.
    #[arg(long, value_enum, default_value_t = ProbeFormat::Compact)]
    probe_format: ProbeFormat,
    /// Core of the receiving poller.
    #[arg(long)]
    core: Option<usize>,
    /// Sleep while idle (between sends, and until a frame arrives) instead of spinning, for
    /// hosts whose cores are shared: the stamps then include the kernel's wake-up.
    #[arg(long)]
    wait: bool,
}

#[derive(clap::Args)]
pub struct OriginateArgs {
    #[command(flatten)]
    port: RttPort,
    /// Interface the echoes come back on (default: `--port`).
    #[arg(long)]
    rx_port: Option<String>,
    /// Send the probes of this pcap trace, in its order (every frame carrying a probe id).
    #[arg(long, conflicts_with_all = ["count", "frame_size", "dst_mac"], required_unless_present = "count")]
    trace: Option<PathBuf>,
    /// Probes to generate, numbered from 1 (instead of `--trace`).
    #[arg(long, requires = "dst_mac")]
    count: Option<u64>,
    /// Probes per second.
    #[arg(long)]
    pps: f64,
    /// Probes sent back to back at each pacing instant.
    #[arg(long, default_value_t = 1)]
    burst: u64,
    /// Frame length of generated probes, bytes.
    #[arg(long)]
    frame_size: Option<usize>,
    /// Destination MAC of generated probes (the reflector's).
    #[arg(long)]
    dst_mac: Option<latency_proto::MacAddr>,
    /// Core of the sending thread.
    #[arg(long)]
    tx_core: Option<usize>,
    /// How long echoes may take after the last probe, ms.
    #[arg(long, default_value_t = 200)]
    drain_ms: u64,
    /// The run's records (Arrow IPC stream, record schema).
    #[arg(long)]
    out: PathBuf,
}

#[derive(clap::Args)]
pub struct ReflectArgs {
    #[command(flatten)]
    port: RttPort,
    /// Send the echoes out of this interface (default: `--port`), addressed to `--dst-mac`.
    #[arg(long, requires = "dst_mac")]
    tx_port: Option<String>,
    /// Address every echo to this MAC instead of swapping the addresses.
    #[arg(long)]
    dst_mac: Option<latency_proto::MacAddr>,
    /// Where the process id is written (removed on exit).
    #[arg(long)]
    pidfile: Option<PathBuf>,
}

/// Open `p`'s receive port on `interface`.
fn rtt_port(p: &RttPort, interface: &str) -> Result<Box<dyn RxPort>, Failure> {
    let port = match p.backend {
        Backend::AfPacket => KernelPort::af_packet(interface, false, None),
        Backend::AfXdp => KernelPort::af_xdp(interface, false, None),
        Backend::Dpdk => return Err(Failure::Usage("originate and reflect take --backend af-packet or af-xdp".into())),
    };
    port.map(|p| Box::new(p) as Box<dyn RxPort>).map_err(|e| Failure::Failed(e.to_string()))
}

fn packet_sender(interface: &str) -> Result<PacketSender, Failure> {
    PacketSender::open(interface).map_err(|e| Failure::Failed(format!("{interface}: {e}")))
}

pub fn originate(a: &OriginateArgs) -> Result<(), Failure> {
    if !(a.pps.is_finite() && a.pps > 0.0) || a.burst == 0 || a.count == Some(0) {
        return Err(Failure::Usage("--count, --pps and --burst must be above 0".into()));
    }
    let format = a.port.probe_format;
    let probes = match (&a.trace, a.count, a.dst_mac) {
        (Some(trace), _, _) => Originate::from_trace(trace, format).map_err(|e| Failure::Usage(e.to_string()))?,
        (None, Some(count), Some(mac)) => Originate::generated(count, format, a.frame_size.unwrap_or(128), mac.0),
        _ => return Err(Failure::Usage("give --trace, or --count with --dst-mac".into())),
    };
    if probes.is_empty() {
        return Err(Failure::Usage("the trace holds no probe to send".into()));
    }
    let rx = rtt_port(&a.port, a.rx_port.as_deref().unwrap_or(&a.port.port))?;
    let tx = packet_sender(&a.port.port)?;
    let info = tsc::probe(200_000_000);
    let o = Originate {
        probes,
        pps: a.pps,
        burst: a.burst,
        format,
        drain: Duration::from_millis(a.drain_ms),
        cores: (a.tx_core, a.port.core),
        wait: a.port.wait,
    };
    let c = latency_agent::rtt::originate(rx, &tx, &o, info.hz, &a.out).map_err(|e| Failure::Failed(e.to_string()))?;
    emit(&AgentEvent::Rtt {
        sent: c.sent,
        received: c.received,
        duplicates: c.duplicates,
        other: c.other,
        seconds: c.seconds,
        file: a.out.clone(),
    });
    Ok(())
}

pub fn reflect(a: &ReflectArgs) -> Result<(), Failure> {
    let mut rx = rtt_port(&a.port, &a.port.port)?;
    let tx = packet_sender(a.tx_port.as_deref().unwrap_or(&a.port.port))?;
    if let Some(c) = a.port.core {
        latency_sys::pin_current_thread(c).map_err(|e| Failure::Usage(format!("--core {c}: {e}")))?;
    }
    if let Some(p) = &a.pidfile {
        std::fs::write(p, format!("{}\n", std::process::id()))
            .map_err(|e| Failure::Failed(format!("{}: {e}", p.display())))?;
    }
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        let _ = signal_hook::flag::register(sig, stop.clone());
    }
    emit(&AgentEvent::Ready {
        ports: vec![rx.name()],
        tsc: tsc::probe(50_000_000),
        pid: std::process::id(),
        setup: None,
    });
    let to = latency_agent::rtt::EchoTo { tx: &tx, dst_mac: a.dst_mac.map(|m| m.0) };
    let (reflected, other) = latency_agent::rtt::reflect(rx.as_mut(), &to, a.port.probe_format, a.port.wait, &stop);
    emit(&AgentEvent::Reflected { reflected, other });
    if let Some(p) = &a.pidfile {
        let _ = std::fs::remove_file(p);
    }
    Ok(())
}
