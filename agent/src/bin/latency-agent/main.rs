//! `latency-agent`: the receiver agent's command line.
//!
//! `capture` runs until its standard input closes or it gets SIGTERM/SIGINT. Commands on stdin
//! (or, with `--control FIFO`, on a named pipe that writers may open and close at will, for an
//! agent running detached under `setsid`), one per line: `begin <run>`, `end <run>`, `quit`
//! ([`AgentCommand`]). Events on stdout, one JSON object per line ([`AgentEvent`]): `ready` (ports,
//! TSC rate, and the setup: rings granted, promiscuous mode, service core, reflect destination),
//! `begin` (run file), `end` (per-run counters), `error`, `stopped`.
//!
//! With `--reflect-port`, `--reflect-dst-mac` is required: every reflection is re-addressed to the
//! sender's NIC. Probes that arrive already tagged (the agent's own reflections looping back) are
//! neither recorded nor reflected; each run's `reflected_loops` counts them.

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
compile_error!("the latency-agent binary runs on x86_64 Linux only (TSC stamps, AF_PACKET rings, PCI BARs)");

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

mod rtt;

use clap::{Parser, Subcommand, ValueEnum};
use rtt::{OriginateArgs, ReflectArgs};

use latency_agent::capture::{KernelPort, RxPort};
use latency_agent::recorder::{MAX_PORTS, Options, Recorder, SoakOptions};
use latency_agent::tsc;
use latency_proto::capture::{CaptureOptions, CaptureSetup, PortRings};
use latency_proto::control::{AgentCommand, AgentEvent, CommandError};
use latency_proto::fastpath;
use latency_proto::probe::{self, ProbeFormat};
use latency_sys::bar::Bar;
use latency_sys::{pin_current_thread, regs};

/// Receiver agent of the latency orchestrator.
#[derive(Parser)]
#[command(name = "latency-agent", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
enum Backend {
    /// Linux AF_PACKET receive rings (no DPDK needed).
    AfPacket,
    /// Linux AF_XDP sockets on queue 0 of each interface (zero-copy where the driver has it).
    AfXdp,
    /// DPDK poll-mode drivers (builds with the `dpdk` feature).
    Dpdk,
}

#[derive(Subcommand)]
enum Command {
    /// Capture probes on two ports (pipeline first, bypass second), or more (further hops after).
    Capture(Box<CaptureArgs>),
    /// Send probes at a pace and stamp them and their echoes (round trips); prints an `rtt` event.
    Originate(OriginateArgs),
    /// Send every probe received back where it came from (MAC addresses swapped), until SIGTERM
    /// or SIGINT; prints `ready`, then a `reflected` event.
    Reflect(ReflectArgs),
    /// Open-NIC-Shell registers through the PCI BAR.
    Regs {
        #[command(subcommand)]
        op: RegsOp,
    },
    /// Measure the TSC rate and check it is invariant; prints JSON.
    Tsc {
        /// Measurement window, ms.
        #[arg(long, default_value_t = 500)]
        window_ms: u64,
    },
    /// Print the record schema.
    Schema,
    /// Print the agent's version and the DPDK version it was built against, as JSON.
    Version,
}

#[derive(clap::Args)]
struct CaptureArgs {
    /// Capture backend.
    #[arg(long, value_enum, default_value = "dpdk")]
    backend: Backend,
    /// Ports: interface names (af-packet, af-xdp) or DPDK port ids, pipeline first.
    #[arg(long, value_delimiter = ',', default_value = "0,1")]
    ports: Vec<String>,
    /// Poller cores, one per port.
    #[arg(long, value_delimiter = ',')]
    cores: Vec<usize>,
    /// Probe id format.
    #[arg(long, value_enum, default_value_t = ProbeFormat::Latencylab)]
    probe_format: ProbeFormat,
    /// Folder of the run files.
    #[arg(long)]
    out: PathBuf,
    /// Write the process id here (removed on exit).
    #[arg(long)]
    pidfile: Option<PathBuf>,
    /// Reflect every stamped probe, tagged P or B, to the sender's hardware-timestamping NIC out
    /// of this port: a DPDK port id (one TX queue per path), or an interface name (af-packet,
    /// af-xdp).
    #[arg(long)]
    reflect_port: Option<String>,
    /// Read commands from this named pipe (created if missing) instead of stdin.
    #[arg(long)]
    control: Option<PathBuf>,
    /// Run even without an invariant TSC (stamps may then be meaningless).
    #[arg(long)]
    force_tsc: bool,
    /// Capacity of the poller → writer queue (batches of 256 records).
    #[arg(long, default_value_t = 4096)]
    queue: usize,
    /// TSC rate measurement window, ms.
    #[arg(long, default_value_t = 200)]
    tsc_window_ms: u64,
    /// Soak mode: keep an HDR histogram of each run's differentials and append it to the run's
    /// interval log (`run=<r>.hlog`) every this many seconds.
    #[arg(long)]
    histogram_interval_s: Option<f64>,
    /// Soak mode without per-copy records: memory and disk stay bounded however long a run is.
    #[arg(long, requires = "histogram_interval_s")]
    no_records: bool,
    /// Rings, promiscuous mode, service core, reflect destination.
    #[command(flatten)]
    options: CaptureOptions,
    /// DPDK EAL arguments (after `--`).
    #[arg(last = true)]
    eal: Vec<String>,
}

#[derive(Subcommand)]
enum RegsOp {
    /// QDMA queue config, indirection tables, CMAC enables.
    Init {
        /// BAR resource file (`/sys/bus/pci/devices/<bdf>/resource2`).
        #[arg(long)]
        bar: PathBuf,
        /// Print the writes instead of doing them.
        #[arg(long)]
        dry_run: bool,
        /// PF0 queue register value.
        #[arg(long, value_parser = parse_u32, default_value = "0x1")]
        pf0_queues: u32,
        /// PF1 queue register value.
        #[arg(long, value_parser = parse_u32, default_value = "0x00010001")]
        pf1_queues: u32,
        /// Indirection table entries to clear per function.
        #[arg(long, default_value_t = 128)]
        indirection_entries: usize,
    },
    /// Health gate: BAR alive and each CMAC's RX status register exactly 0x00000003 (exit 1 otherwise).
    Check {
        /// BAR resource file.
        #[arg(long)]
        bar: PathBuf,
        /// CMACs of the board (a U50 has one).
        #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(1..=2))]
        cmacs: u8,
    },
    /// What the card runs, as JSON (`{"build_timestamp":"0x10140810"}`): the readback a bring-up
    /// compares with the bitstream manifest's `identity`.
    Identity {
        /// BAR resource file.
        #[arg(long)]
        bar: PathBuf,
    },
    /// Read one register.
    Read {
        /// BAR resource file.
        #[arg(long)]
        bar: PathBuf,
        /// Offset (hex with 0x, or decimal).
        #[arg(value_parser = parse_u32)]
        offset: u32,
    },
    /// Write one register.
    Write {
        /// BAR resource file.
        #[arg(long)]
        bar: PathBuf,
        /// Offset.
        #[arg(value_parser = parse_u32)]
        offset: u32,
        /// Value.
        #[arg(value_parser = parse_u32)]
        value: u32,
    },
}

fn parse_u32(s: &str) -> Result<u32, String> {
    let r = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u32::from_str_radix(h, 16),
        None => s.parse(),
    };
    r.map_err(|e| format!("`{s}`: {e}"))
}

/// Print one event line. A closed stdout loses the event rather than ending the capture.
fn emit(event: &AgentEvent) {
    match serde_json::to_string(event) {
        Ok(line) => {
            let _ = writeln!(std::io::stdout().lock(), "{line}");
        }
        Err(e) => eprintln!("latency-agent: cannot encode {event:?}: {e}"),
    }
}

fn main() -> ExitCode {
    let result = match Cli::parse().command {
        // A capture that cannot start says why on stdout too, where its controller waits for
        // `ready`.
        Command::Capture(args) => {
            capture(&args).inspect_err(|e| emit(&AgentEvent::Error { command: None, error: e.to_string() }))
        }
        Command::Originate(args) => rtt::originate(&args),
        Command::Reflect(args) => rtt::reflect(&args),
        Command::Regs { op } => regs_cmd(op),
        Command::Tsc { window_ms } => {
            emit(&AgentEvent::Tsc(tsc::probe(window_ms * 1_000_000)));
            Ok(())
        }
        Command::Version => {
            #[cfg(feature = "dpdk")]
            let dpdk = Some(latency_sys::dpdk::DPDK_VERSION.to_string());
            #[cfg(not(feature = "dpdk"))]
            let dpdk = None;
            emit(&AgentEvent::Version { agent: env!("CARGO_PKG_VERSION").into(), dpdk });
            Ok(())
        }
        Command::Schema => {
            for f in latency_agent::record_schema().fields() {
                println!("{}\t{}\t{}", f.name(), f.data_type(), if f.is_nullable() { "nullable" } else { "required" });
            }
            Ok(())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("latency-agent: {failure}");
            ExitCode::from(failure.status() as u8)
        }
    }
}

/// The agent's exit statuses (`docs/agent.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum Status {
    /// A device, a file, the capture or the hardware failed.
    Failed = 1,
    /// The command line asks for something this agent cannot do.
    Usage = 2,
}

/// Why a command of the agent failed; the variant is its exit status.
#[derive(Debug)]
enum Failure {
    /// The command line asks for something this agent cannot do (exit 2).
    Usage(String),
    /// A device, a file, the capture or the hardware failed (exit 1).
    Failed(String),
}

impl Failure {
    /// The exit status.
    fn status(&self) -> Status {
        match self {
            Failure::Usage(_) => Status::Usage,
            Failure::Failed(_) => Status::Failed,
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Usage(m) | Failure::Failed(m) => f.write_str(m),
        }
    }
}

fn regs_cmd(op: RegsOp) -> Result<(), Failure> {
    let io = |e: std::io::Error| Failure::Failed(e.to_string());
    let map =
        |bar: &PathBuf| Bar::map(bar, regs::WINDOW).map_err(|e| Failure::Failed(format!("{}: {e}", bar.display())));
    match op {
        RegsOp::Init { bar, dry_run, pf0_queues, pf1_queues, indirection_entries } => {
            let writes = regs::init_writes(&regs::Config { pf0_queues, pf1_queues, indirection_entries });
            if dry_run {
                for w in &writes {
                    println!("write {:#06x} = {:#010x}  # {}", w.offset, w.value, w.what);
                }
                return Ok(());
            }
            regs::apply(&mut map(&bar)?, &writes).map_err(io)?;
            println!("{} registers written", writes.len());
            Ok(())
        }
        RegsOp::Check { bar, cmacs } => {
            let problems = regs::check(&map(&bar)?, usize::from(cmacs)).map_err(io)?;
            if problems.is_empty() {
                println!("ok: BAR alive, CMAC RX status 0x00000003 ({cmacs} of {cmacs})");
                Ok(())
            } else {
                Err(Failure::Failed(problems.join("; ")))
            }
        }
        RegsOp::Identity { bar } => {
            let build = map(&bar)?.read32(regs::BUILD_TIMESTAMP).map_err(io)?;
            // The board, where the BAR reaches the CMS and its firmware runs.
            let size = std::fs::metadata(&bar).map_or(0, |m| m.len());
            let profile = if size >= (regs::CMS_PROFILE + 4) as u64 {
                let word = Bar::map(&bar, regs::CMS_PROFILE + 4)
                    .and_then(|b| b.read32(regs::CMS_PROFILE))
                    .map_err(|e| Failure::Failed(format!("{}: {e}", bar.display())))?;
                regs::profile_name(word)
            } else {
                None
            };
            let identity = latency_proto::CardIdentity {
                build_timestamp: Some(latency_proto::Hex32(build)),
                profile,
                ..latency_proto::CardIdentity::default()
            };
            println!("{}", serde_json::to_string(&identity).map_err(|e| Failure::Failed(e.to_string()))?);
            Ok(())
        }
        RegsOp::Read { bar, offset } => {
            println!("{:#010x}", map(&bar)?.read32(offset as usize).map_err(io)?);
            Ok(())
        }
        RegsOp::Write { bar, offset, value } => map(&bar)?.write32(offset as usize, value).map_err(io),
    }
}

fn capture(args: &CaptureArgs) -> Result<(), Failure> {
    let CaptureArgs {
        backend,
        ports,
        cores,
        probe_format,
        out,
        pidfile,
        reflect_port,
        control,
        force_tsc,
        queue,
        tsc_window_ms,
        histogram_interval_s,
        no_records,
        options,
        eal,
    } = args;
    let (backend, format, force_tsc, queue, tsc_window_ms) =
        (*backend, *probe_format, *force_tsc, *queue, *tsc_window_ms);
    let k = ports.len();
    if !(2..=MAX_PORTS).contains(&k) {
        return Err(Failure::Usage(format!(
            "2 to {MAX_PORTS} ports are needed (pipeline, bypass, further ports), got {k}"
        )));
    }
    if k > 2 {
        let two_only = [
            (reflect_port.is_some(), "--reflect-port"),
            (histogram_interval_s.is_some(), "--histogram-interval-s"),
            (matches!(backend, Backend::Dpdk), "--backend dpdk"),
        ];
        if let Some((_, what)) = two_only.iter().find(|(used, _)| *used) {
            return Err(Failure::Usage(format!("{what} takes two ports (pipeline, bypass), not {k}")));
        }
    }
    let reflect = match (reflect_port, options.reflect_dst_mac) {
        (Some(port), Some(mac)) => Some((port, mac)),
        (None, None) => None,
        (Some(_), None) => {
            return Err(Failure::Usage("--reflect-port needs --reflect-dst-mac (the MAC of the sender's timestamping NIC, which every reflection is addressed to)".into(),
            ));
        }
        (None, Some(_)) => return Err(Failure::Usage("--reflect-dst-mac is only used with --reflect-port".into())),
    };
    if options.rx_ring == 0 || options.tx_ring == 0 {
        return Err(Failure::Usage("--rx-ring and --tx-ring must be at least 1".into()));
    }
    let service_core = options.service_core.map(|c| c as usize);
    // The control thread (this one) runs on the service core, pinned before any other thread is
    // started, so that every thread that does not pin itself (the command reader, threads of the
    // capture backends) inherits it; the pollers pin themselves to their own cores.
    if let Some(c) = service_core
        && let Err(e) = pin_current_thread(c)
    {
        return Err(Failure::Usage(format!("--service-core {c}: cannot pin to it: {e}")));
    }
    let info = tsc::probe(tsc_window_ms * 1_000_000);
    if !info.invariant && !force_tsc {
        return Err(Failure::Usage(format!(
            "the TSC is not invariant (flags found: {:?}); refusing to stamp with it (--force-tsc overrides)",
            info.flags
        )));
    }
    let mut xdp = Vec::new();
    let mut packet_longest = None;
    let (rx, rings): (Vec<Box<dyn RxPort>>, Vec<PortRings>) = match backend {
        Backend::AfPacket | Backend::AfXdp => (
            ports
                .iter()
                .zip([probe::TAG_PIPELINE, probe::TAG_BYPASS].into_iter().chain(std::iter::repeat(0)))
                .map(|(p, tag)| {
                    let port = match backend {
                        Backend::AfXdp => KernelPort::af_xdp(p, options.promiscuous, options.busy_poll_us)?,
                        _ => KernelPort::af_packet(p, options.promiscuous, options.longest_frame.map(usize::from))?,
                    };
                    xdp.extend(port.xdp_grant().cloned());
                    packet_longest = packet_longest.or(port.longest_frame());
                    let port = match reflect {
                        Some((r, mac)) => port.reflect_to(r, tag, format, mac)?,
                        None => port,
                    };
                    Ok(Box::new(port) as Box<dyn RxPort>)
                })
                .collect::<Result<_, std::io::Error>>()
                .map_err(|e| Failure::Failed(e.to_string()))?,
            Vec::new(),
        ),
        Backend::Dpdk => {
            let reflect_port = match reflect {
                Some((r, _)) => Some(r.parse::<u16>().map_err(|_| {
                    Failure::Usage(format!("--reflect-port {r}: the dpdk backend takes a DPDK port id (0, 1, 2, ...)"))
                })?),
                None => None,
            };
            open_dpdk(ports, reflect_port, format, options, eal)?
        }
    };
    let soak = match *histogram_interval_s {
        Some(s) if s.is_finite() && s > 0.0 => {
            Some(SoakOptions { interval: Duration::from_secs_f64(s), records: !no_records, tsc_hz: info.hz })
        }
        Some(s) => {
            return Err(Failure::Usage(format!("--histogram-interval-s {s}: needs a number of seconds above 0")));
        }
        None => None,
    };
    let names: Vec<String> = rx.iter().map(|p| p.name()).collect();
    let mut setup = CaptureSetup {
        rings,
        promiscuous: options.promiscuous,
        service_core: options.service_core,
        reflect_dst_mac: reflect.map(|(_, mac)| mac),
        af_xdp: xdp,
        af_packet_longest_frame: packet_longest.map(|l| l as u32),
        fast_path: None,
    };
    let (kind, interfaces) = match backend {
        Backend::Dpdk => (fastpath::Backend::Dpdk, &[][..]),
        Backend::AfPacket => (fastpath::Backend::AfPacket, &ports[..]),
        Backend::AfXdp => (fastpath::Backend::AfXdp, &ports[..]),
    };
    let facts = latency_agent::fastpath::judge(std::path::Path::new("/"), kind, cores, interfaces, options, &setup);
    setup.fast_path = Some(facts.map_err(|refused| Failure::Usage(refused.to_string()))?);
    if let Some(p) = &pidfile {
        std::fs::write(p, format!("{}\n", std::process::id()))
            .map_err(|e| Failure::Failed(format!("{}: {e}", p.display())))?;
    }
    let mut recorder = Recorder::start(
        rx,
        Options {
            format,
            cores: cores.clone(),
            out: out.clone(),
            queue,
            service_core,
            soak,
            sleep_unpinned: options.sleep_unpinned,
            tsc_hz: info.hz,
        },
    )
    .map_err(|e| Failure::Failed(format!("cannot start: {e}")))?;
    // Again after the backend: DPDK's EAL pins the thread that initialises it to its main lcore.
    if let Some(c) = service_core
        && let Err(e) = pin_current_thread(c)
    {
        recorder.stop();
        return Err(Failure::Usage(format!("--service-core {c}: cannot pin to it: {e}")));
    }

    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        let _ = signal_hook::flag::register(sig, stop.clone());
    }
    let lines = match control {
        Some(fifo) => {
            latency_sys::fifo::listen(fifo).map_err(|e| Failure::Failed(format!("{}: {e}", fifo.display())))?
        }
        None => {
            let (tx, lines) = std::sync::mpsc::channel::<String>();
            let reader = std::thread::Builder::new().name("control".into());
            reader
                .spawn(move || {
                    for line in std::io::stdin().lock().lines() {
                        let Ok(line) = line else { break };
                        if tx.send(line).is_err() {
                            break;
                        }
                    }
                })
                .map_err(|e| Failure::Failed(format!("cannot start the control thread: {e}")))?;
            lines
        }
    };
    // Ready only once the control pipe exists: a controller writing to it earlier would create a
    // plain file instead.
    emit(&AgentEvent::Ready { ports: names, tsc: info, pid: std::process::id(), setup: Some(Box::new(setup)) });
    while !stop.load(Ordering::SeqCst) {
        let line = match lines.recv_timeout(Duration::from_millis(100)) {
            Ok(l) => l,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => continue,
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
        };
        let failed = |error: String| AgentEvent::Error { command: Some(line.clone()), error };
        match line.parse::<AgentCommand>() {
            Ok(AgentCommand::Begin { run }) => emit(&match recorder.begin(run) {
                Ok(file) => AgentEvent::Begin { run, file },
                Err(e) => failed(e.to_string()),
            }),
            Ok(AgentCommand::End { run }) => emit(&match recorder.end(run) {
                Ok(counters) => AgentEvent::End(counters),
                Err(e) => failed(e.to_string()),
            }),
            Ok(AgentCommand::Quit) => break,
            Err(CommandError::Empty) => {}
            Err(e) => emit(&failed(e.to_string())),
        }
        for error in recorder.errors() {
            emit(&AgentEvent::Error { command: None, error });
        }
    }
    recorder.stop();
    if let Some(p) = &pidfile {
        let _ = std::fs::remove_file(p);
    }
    emit(&AgentEvent::Stopped);
    Ok(())
}

/// The receive ports and the rings their drivers granted (`latency_sys::dpdk::Opened`, boxed).
type Opened = (Vec<Box<dyn RxPort>>, Vec<PortRings>);

#[cfg(not(feature = "dpdk"))]
fn open_dpdk(
    _: &[String],
    _: Option<u16>,
    _: ProbeFormat,
    _: &CaptureOptions,
    _: &[String],
) -> Result<Opened, Failure> {
    Err(Failure::Usage(
        "this build has no DPDK backend (build with `--features dpdk`); use `--backend af-packet`".into(),
    ))
}

#[cfg(feature = "dpdk")]
fn open_dpdk(
    ports: &[String],
    reflect_port: Option<u16>,
    format: ProbeFormat,
    options: &CaptureOptions,
    eal: &[String],
) -> Result<Opened, Failure> {
    use latency_sys::dpdk::{PortConfig, open_ports};
    // Reflecting out of `reflect_port` when the options name a destination MAC.
    let config = PortConfig {
        format,
        reflect: reflect_port.zip(options.reflect_dst_mac),
        rx_ring: options.rx_ring,
        tx_ring: options.tx_ring,
        promiscuous: options.promiscuous,
    };
    let (ports, rings) = open_ports(ports, &config, eal).map_err(|e| Failure::Failed(e.to_string()))?;
    Ok((ports.into_iter().map(|p| Box::new(p) as Box<dyn RxPort>).collect(), rings))
}
