//! `latency-agent`: the receiver agent. This build knows the record schema; capture backends are
//! added behind their own features.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("schema") => {
            let schema = latency_agent::record_schema();
            for f in schema.fields() {
                println!("{}\t{}\t{}", f.name(), f.data_type(), if f.is_nullable() { "nullable" } else { "required" });
            }
            ExitCode::SUCCESS
        }
        Some("--version") => {
            println!("latency-agent {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("usage: latency-agent schema | --version");
            ExitCode::from(2)
        }
    }
}
