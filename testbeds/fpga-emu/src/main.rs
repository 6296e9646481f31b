//! `fpga-emu`: run the FPGA emulator, or tell a running one to flash, or check its state.
//!
//! Exit status: 0 success; 1 the command failed (flash error, wrong bitstream, timeout, emulator
//! not running); 2 invalid arguments.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use clap::{Parser, Subcommand};

use fpga_emu::{bitstream, control, emulator, esnet, hw_manager, state};
use latency_proto::{CardIdentity, Hex32};

/// User-space FPGA SmartNIC emulator of the emulated testbed.
#[derive(Parser)]
#[command(name = "fpga-emu", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the emulator (until SIGTERM/SIGINT or `quit` on the control FIFO; SIGHUP resets it).
    Run {
        /// Switch-facing link of the pipeline copy (A).
        #[arg(long)]
        switch_a: String,
        /// Switch-facing link of the bypass copy (B).
        #[arg(long)]
        switch_b: String,
        /// Host-facing link of the pipeline (P).
        #[arg(long)]
        host_p: String,
        /// Host-facing link of the bypass (B).
        #[arg(long)]
        host_b: String,
        /// Folder of the state file, control FIFO (`ctl`), fake BAR (`bar2`) and pid file.
        #[arg(long)]
        dir: PathBuf,
        /// Bitstream loaded at start: a name, an image path or a spec file.
        #[arg(long, default_value = "null")]
        bitstream: String,
        /// Pipeline delay override, µs (else the bitstream's).
        #[arg(long)]
        delay_us: Option<u64>,
        /// How long a flash keeps the host-facing links down, ms.
        #[arg(long, default_value_t = 500)]
        flash_down_ms: u64,
        /// The board the card says it is: its management firmware's profile (`U280`, `U2XX` for a
        /// U250, `U50A`, `U55N` for a U55C).
        #[arg(long, default_value = "U280", value_parser = hex_word)]
        profile: String,
        /// Longest sleep of the loop while frames flow, µs.
        #[arg(long, default_value_t = 50)]
        poll_us: u64,
        /// Sleep of the loop after 20 ms without frames, µs.
        #[arg(long, default_value_t = 1000)]
        idle_poll_us: u64,
        /// Spin instead of sleeping this long before a frame is due, µs.
        #[arg(long, default_value_t = 100)]
        spin_us: u64,
        /// Count each pipeline frame's delay from the moment the kernel received it, after this
        /// base latency of the card's own (µs; longer than the loop's longest wait for a frame),
        /// instead of from the loop pass that took it: for a card fed by another card.
        #[arg(long)]
        arrival_base_us: Option<u64>,
    },
    /// Flash a running emulator and wait until it runs the new bitstream.
    Flash {
        /// The emulator's folder.
        #[arg(long)]
        dir: PathBuf,
        /// Image path (its file stem names the behaviour), behaviour name, or spec file.
        image: String,
        /// Pipeline delay override, µs.
        #[arg(long)]
        delay_us: Option<u64>,
        /// sha256 of the image file, which the card then reads back as its identity.
        #[arg(long, value_parser = hex_word)]
        sha256: Option<String>,
        /// The bitstream's USERCODE (its header's UserID), which the card then reads over JTAG.
        #[arg(long, value_parser = usercode)]
        usercode: Option<Hex32>,
        /// Give up after this many seconds.
        #[arg(long, default_value_t = 10.0)]
        timeout_s: f64,
    },
    /// Reset a running emulator (flash the loaded bitstream again) and wait until it runs.
    Reset {
        /// The emulator's folder.
        #[arg(long)]
        dir: PathBuf,
        /// Give up after this many seconds.
        #[arg(long, default_value_t = 10.0)]
        timeout_s: f64,
    },
    /// Print the state; exit 1 unless the emulator runs (the bitstream `--expect`, if given).
    Status {
        /// The emulator's folder.
        #[arg(long)]
        dir: PathBuf,
        /// Expected bitstream: image path, name or behaviour.
        #[arg(long)]
        expect: Option<String>,
        /// Wait up to this many seconds for the condition.
        #[arg(long, default_value_t = 0.0)]
        wait_s: f64,
    },
    /// The ESnet SmartNIC stack's `sn-cfg`, as the emulated card answers it.
    SnCfg {
        /// The emulator's folder.
        #[arg(long)]
        dir: PathBuf,
        /// The client's command line (`show device info`, `configure port --state enable`, …).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// The ESnet SmartNIC stack's `sn-p4`, as the emulated card answers it.
    SnP4 {
        /// The emulator's folder.
        #[arg(long)]
        dir: PathBuf,
        /// The client's command line (`clear table`, `apply p4bm FILE`).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Vivado's hardware manager in batch mode, reading the card's USERCODE over JTAG.
    Vivado {
        /// The emulator's folder.
        #[arg(long)]
        dir: PathBuf,
        /// Vivado's command line (`-mode batch -source SCRIPT -tclargs …`).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Print what a bitstream resolves to (behaviour, delay).
    Resolve {
        /// Image path, name or spec file.
        image: String,
    },
}

/// A checksum or profile: one word of letters and digits.
fn hex_word(s: &str) -> Result<String, String> {
    if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric()) {
        Ok(s.to_string())
    } else {
        Err(format!("`{s}` is not one word of letters and digits"))
    }
}

fn usercode(s: &str) -> Result<Hex32, String> {
    Hex32::parse(s).ok_or_else(|| format!("`{s}` is not a 32-bit hex value"))
}

/// A client's output on stdout, or its failure.
fn client(r: Result<String, esnet::Failure>) -> Result<(), (u8, String)> {
    r.map(|out| print!("{out}")).map_err(|f| (f.code, f.message))
}

fn seconds(s: f64) -> Result<Duration, (u8, String)> {
    Duration::try_from_secs_f64(s).map_err(|e| (2, format!("bad duration {s}: {e}")))
}

fn print(v: &impl serde::Serialize) {
    println!("{}", serde_json::to_string(v).unwrap_or_default());
}

fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::Run {
            switch_a,
            switch_b,
            host_p,
            host_b,
            dir,
            bitstream,
            delay_us,
            flash_down_ms,
            profile,
            poll_us,
            idle_poll_us,
            spin_us,
            arrival_base_us,
        } => {
            let delay_override = delay_us.map(Duration::from_micros);
            match bitstream::resolve(&bitstream, delay_override) {
                Err(e) => Err((2, e.to_string())),
                Ok(b) => run(emulator::Config {
                    switch_a,
                    switch_b,
                    host_p,
                    host_b,
                    dir,
                    bitstream: b,
                    delay_override,
                    flash_down: Duration::from_millis(flash_down_ms),
                    profile,
                    poll: Duration::from_micros(poll_us),
                    idle_poll: Duration::from_micros(idle_poll_us),
                    spin: Duration::from_micros(spin_us),
                    arrival_base: arrival_base_us.map(Duration::from_micros),
                }),
            }
        }
        Command::Flash { dir, image, delay_us, sha256, usercode, timeout_s } => seconds(timeout_s).and_then(|t| {
            let written = CardIdentity { sha256, usercode, ..CardIdentity::default() };
            let s = control::flash(&dir, &image, delay_us, &written, t).map_err(|e| (1, e.to_string()))?;
            print(&s.bitstream);
            Ok(())
        }),
        Command::Reset { dir, timeout_s } => seconds(timeout_s).and_then(|t| {
            let live = control::live_state(&dir).map_err(|e| (1, e.to_string()))?;
            let delay = u64::try_from(live.bitstream.delay.as_micros()).unwrap_or(u64::MAX);
            let written = CardIdentity { profile: None, ..live.identity };
            let s = control::flash(&dir, &live.bitstream.image, Some(delay), &written, t)
                .map_err(|e| (1, e.to_string()))?;
            print(&s.bitstream);
            Ok(())
        }),
        Command::Status { dir, expect, wait_s } => seconds(wait_s).and_then(|t| {
            let s = control::status(&dir, expect.as_deref(), t).map_err(|e| (1, e.to_string()))?;
            print(&s);
            Ok(())
        }),
        Command::SnCfg { dir, args } => client(esnet::sn_cfg(&dir, &args)),
        Command::SnP4 { dir, args } => client(esnet::sn_p4(&dir, &args)),
        Command::Vivado { dir, args } => client(hw_manager::vivado(&dir, &args)),
        Command::Resolve { image } => match bitstream::resolve(&image, None) {
            Ok(b) => {
                print(&b);
                Ok(())
            }
            Err(e) => Err((1, e.to_string())),
        },
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err((code, msg)) => {
            eprintln!("fpga-emu: {msg}");
            ExitCode::from(code)
        }
    }
}

fn run(cfg: emulator::Config) -> Result<(), (u8, String)> {
    std::fs::create_dir_all(&cfg.dir).map_err(|e| (1, format!("{}: {e}", cfg.dir.display())))?;
    let pidfile = cfg.dir.join(state::PID_FILE);
    std::fs::write(&pidfile, format!("{}\n", std::process::id()))
        .map_err(|e| (1, format!("{}: {e}", pidfile.display())))?;
    let stop = Arc::new(AtomicBool::new(false));
    let hup = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, stop.clone()).map_err(|e| (1, format!("signal handler: {e}")))?;
    }
    signal_hook::flag::register(signal_hook::consts::SIGHUP, hup.clone())
        .map_err(|e| (1, format!("signal handler: {e}")))?;
    let fifo = cfg.dir.join(state::CONTROL_FIFO);
    let commands = control::listen(&fifo).map_err(|e| (1, format!("{}: {e}", fifo.display())))?;
    let result = emulator::run(cfg, &stop, &hup, &commands).map_err(|e| (1, e.to_string()));
    let _ = std::fs::remove_file(&pidfile);
    result
}
