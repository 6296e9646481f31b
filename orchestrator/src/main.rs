//! `orchestrate`: command-line entry point. Argument parsing and exit codes only.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use orchestrator::plan::{self, yaml::Diagnostic};
use orchestrator::schedule::{self, Schedule};

const EXIT_CODES: &str = "\
Exit status:
  0    success
  1    the study ran but runs failed their checks, or a regression was found
  2    invalid input: plan, manifest, inventory or arguments (nothing was touched)
  3    testbed failure: a host or step failed after its retries
  4    results could not be written or read
  130  interrupted (Ctrl-C); the journal is consistent and --resume continues";

/// Declarative orchestrator for FPGA SmartNIC latency studies.
#[derive(Parser)]
#[command(name = "orchestrate", version, after_help = EXIT_CODES, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Plan to run (shorthand for `orchestrate run PLAN`).
    plan: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Command {
    /// Check plans and everything they reference; report every problem at once.
    Validate {
        /// Plan files.
        #[arg(required = true)]
        plans: Vec<PathBuf>,
    },
    /// Dry run: every session, step and run with its rendered command, and the predicted duration.
    Plan {
        /// Plan file.
        plan: PathBuf,
        /// `sim` or an inventory file (overrides the plan's `testbed`).
        #[arg(long)]
        testbed: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

enum Failure {
    Invalid(Vec<Diagnostic>),
    Usage(String),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Validate { plans }) => validate(&plans),
        Some(Command::Plan { plan, testbed, json }) => show_plan(&plan, testbed.as_deref(), json),
        None => match cli.plan {
            Some(_) => Err(Failure::Usage("`orchestrate run` is not available in this build yet".into())),
            None => Err(Failure::Usage("no plan given; see `orchestrate --help`".into())),
        },
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Invalid(diags)) => {
            print_diagnostics(&diags);
            ExitCode::from(2)
        }
        Err(Failure::Usage(msg)) => {
            eprintln!("error: {msg}");
            ExitCode::from(2)
        }
    }
}

fn print_diagnostics(diags: &[Diagnostic]) {
    let snippets = std::io::stderr().is_terminal();
    for d in diags {
        let text = match snippets.then(|| std::fs::read_to_string(&d.file).ok()).flatten() {
            Some(src) => d.with_snippet(&src),
            None => d.to_string(),
        };
        eprintln!("{text}");
    }
    eprintln!("{} problem{} found", diags.len(), if diags.len() == 1 { "" } else { "s" });
}

fn validate(plans: &[PathBuf]) -> Result<(), Failure> {
    let mut all = Vec::new();
    for p in plans {
        match plan::load(p, None) {
            Ok((plan, _)) => {
                eprintln!("{}: ok (study `{}`, {} programs)", p.display(), plan.study, plan.programs.len())
            }
            Err(plan::Invalid(mut d)) => all.append(&mut d),
        }
    }
    if all.is_empty() { Ok(()) } else { Err(Failure::Invalid(all)) }
}

fn load_schedule(path: &Path, testbed: Option<&str>) -> Result<Schedule, Failure> {
    let (plan, inventory) = plan::load(path, testbed).map_err(|e| Failure::Invalid(e.0))?;
    schedule::expand(&plan, inventory.as_ref()).map_err(Failure::Usage)
}

fn show_plan(path: &Path, testbed: Option<&str>, json: bool) -> Result<(), Failure> {
    let s = load_schedule(path, testbed)?;
    if json {
        let text = serde_json::to_string_pretty(&s).map_err(|e| Failure::Usage(e.to_string()))?;
        println!("{text}");
    } else {
        print!("{}", orchestrator::schedule::describe(&s));
    }
    Ok(())
}
