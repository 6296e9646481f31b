//! The command line: every subcommand and option, as clap reads them (completions and manual
//! pages are generated from this too).

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use latency_plan as plan;
use orchestrator::exit::ExitStatus;

/// Declarative orchestrator for FPGA SmartNIC latency studies.
#[derive(Parser)]
#[command(name = "orchestrate", version, after_help = ExitStatus::help())]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Clone, clap::Args)]
pub(crate) struct RunArgs {
    /// Plan file.
    #[arg(value_parser = utf8_path())]
    pub(crate) plan: PathBuf,
    /// `sim` or an inventory file (overrides the plan's `testbed`); several, comma-separated, run
    /// the sessions on that many slices at once (`sim,sim`: two simulated slices).
    #[arg(long)]
    pub(crate) testbed: Option<String>,
    /// Results folder (default: results/STUDY/UTCTIME-PLANHASH/, with a suffix -2, -3, … when
    /// another study took that name in the same second).
    #[arg(long, value_parser = utf8_path())]
    pub(crate) out: Option<PathBuf>,
    /// Continue the study in --out: keep verified runs, redo the rest.
    #[arg(long, requires = "out")]
    pub(crate) resume: bool,
    /// Seed of the simulator and resampling (default: the plan's).
    #[arg(long)]
    pub(crate) seed: Option<u64>,
    /// Simulated testbed: YAML file overriding model parameters.
    #[arg(long, value_parser = utf8_path())]
    pub(crate) sim_model: Option<PathBuf>,
    /// Simulated testbed: take the modelled wall time of every step and replay.
    #[arg(long)]
    pub(crate) realtime: bool,
    /// Progress as text on stderr (bars on a terminal, lines otherwise), or `json`: the journal's
    /// events as JSON lines on stdout, bars off, and a last line naming the results.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub(crate) log_format: LogFormat,
    /// No progress on stderr: warnings and errors only.
    #[arg(long)]
    pub(crate) quiet: bool,
}

/// How `run` shows its progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum LogFormat {
    /// Bars and lines on stderr.
    Text,
    /// JSON lines on stdout.
    Json,
}

#[derive(Subcommand)]
pub(crate) enum Command {
    /// Run a study (`orchestrate PLAN` is the same).
    Run(RunArgs),
    /// Check plans (and everything they reference), inventories and bitstream manifests, each
    /// told apart by its keys; report every problem at once.
    Validate {
        /// Plan, inventory or bitstream manifest files.
        #[arg(required = true)]
        plans: Vec<PathBuf>,
    },
    /// Statistical pipeline over a results folder; writes RESULTS_DIR/summary.json.
    Analyze {
        /// Results folder.
        dir: PathBuf,
    },
    /// Where a study stands: runs done, failed, missing and set apart per session, the lock's
    /// holder, whether the summary is current, and every run a `--resume` would redo, with why.
    /// Changes nothing.
    Status {
        /// Results folder.
        dir: PathBuf,
        /// The plan (default: the one the study was run from, as its provenance names it).
        #[arg(long)]
        plan: Option<PathBuf>,
        /// JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Whether a results folder's reports follow from its data: every run file against the
    /// journal's checksum, the analysis run again and compared with `summary.json`, the reports
    /// rendered again from it and compared; writes nothing; exit 1 naming each difference.
    Verify {
        /// Results folder.
        dir: PathBuf,
    },
    /// Reports (HTML, Markdown) from a results folder (analysed first if needed).
    Report {
        /// Results folder.
        dir: PathBuf,
        /// Formats, comma-separated (default: the plan's).
        #[arg(long, value_delimiter = ',', value_enum)]
        format: Vec<latency_plan::ReportFormat>,
    },
    /// Regression check of CANDIDATE against BASELINE (results folders); exit 1 on regression.
    Compare {
        /// Baseline results folder.
        baseline: PathBuf,
        /// Candidate results folder.
        candidate: PathBuf,
        /// Write JUnit XML here (one test case per program).
        #[arg(long)]
        junit: Option<PathBuf>,
        /// Write the comparison page here: both studies side by side, one self-contained HTML file.
        #[arg(long)]
        html: Option<PathBuf>,
        /// Largest accepted median shift, ns (default: the candidate plan's, else 3).
        #[arg(long, value_parser = non_negative)]
        median_shift_ns: Option<f64>,
        /// Largest accepted p99 shift, ns (default: the candidate plan's, else 10).
        #[arg(long, value_parser = non_negative)]
        p99_shift_ns: Option<f64>,
        /// Largest accepted Kolmogorov–Smirnov distance (default: the candidate plan's, else 0.1).
        #[arg(long, value_parser = non_negative)]
        ks: Option<f64>,
    },
    /// Design a study: from a dimensioning study's variance components and the testbed's costs,
    /// the runs per session and sessions that reach a precision in the least testbed time (or the
    /// best within a budget); writes the designed plan. Exit 1 when the target cannot be met.
    Design {
        /// The plan to design.
        plan: PathBuf,
        /// The dimensioning study (a results folder of this plan, or one like it).
        #[arg(long)]
        from: PathBuf,
        /// Target: every program's median and p99 95 % half-width at most this, ns.
        #[arg(long, value_parser = positive)]
        ci95_ns: Option<f64>,
        /// Target: every program's median and p99 95 % half-width at most what the plan as
        /// written gives it (its sessions and runs, from the dimensioning study's components).
        #[arg(long)]
        as_precise_as_plan: bool,
        /// Budget of testbed time (`3h`, `90m`, `5400s`).
        #[arg(long, value_parser = parse_duration)]
        budget: Option<f64>,
        /// The testbed whose costs count (`sim` or an inventory; default: the plan's).
        #[arg(long)]
        testbed: Option<String>,
        /// Write the designed plan here (must not exist).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Step costs from what these studies' journals measured (results folders run on the
        /// testbed), instead of the inventory's estimates.
        #[arg(long, num_args = 1..)]
        costs_from: Vec<PathBuf>,
        /// A load sweep on the testbed (a results folder of a plan with a `pacing_pps` factor):
        /// replay at its highest pacing whose median and p99 stay within --pacing-within of those
        /// at the plan's pacing.
        #[arg(long)]
        pacing_from: Option<PathBuf>,
        /// How close to the plan's pacing's latency a faster pacing must stay, ns (default: the
        /// target, --ci95-ns).
        #[arg(long, value_parser = positive)]
        pacing_within: Option<f64>,
    },
    /// The results history: finished studies in a store (a folder or `s3://bucket/prefix`).
    History {
        #[command(subcommand)]
        op: HistoryOp,
    },
    /// Trend of a history: per study, program, level and statistic (p50, p99) the series of nights,
    /// its changes (jumpavg) as Markdown on stdout; exit 1 when a series' latest change is a
    /// regression.
    Trend {
        /// The store: a folder, or `s3://BUCKET[/PREFIX]` (credentials and endpoint from `AWS_*`).
        #[arg(long)]
        store: String,
        /// The nightly plan whose `trend:` gates judge the series (default: 3 ns on medians,
        /// 10 ns on p99s, 3 × the night-to-night noise, five nights, no confirmation).
        #[arg(long, value_parser = utf8_path())]
        plan: Option<PathBuf>,
        /// Write the self-contained HTML trend page here.
        #[arg(long)]
        html: Option<PathBuf>,
        /// Write JUnit XML here (one test case per series).
        #[arg(long)]
        junit: Option<PathBuf>,
        /// Print `{"changes": […], "series": […]}` as JSON instead of Markdown.
        #[arg(long)]
        json: bool,
    },
    /// A nightly job: run PLAN, add the study to the history, judge the trend, write the report,
    /// the trend page (`trend.html`), its Markdown (`trend.md`) and JUnit (`trend.xml`) into the
    /// results folder. Exit 0 pass, 1 regression, 5 runs failed (not added, not judged), 3 or 4
    /// infrastructure (testbed, results or store).
    Nightly {
        #[command(flatten)]
        run: RunArgs,
        /// The history store: a folder, or `s3://BUCKET[/PREFIX]` (credentials and endpoint from
        /// `AWS_*`).
        #[arg(long)]
        store: String,
    },
    /// The first of an ordered list of a program's builds whose latency moved: PLAN, narrowed to
    /// the program, runs with the first build (known good) and on midpoints towards the last
    /// (known bad), each judged against the first with the plan's regression thresholds; at most
    /// ⌈log₂ N⌉ + 1 studies, each in the bisection's folder (--out; --resume finishes one),
    /// listed with the build found in `bisect.md` and `bisect.json`.
    Bisect {
        #[command(flatten)]
        run: RunArgs,
        /// The builds file: `program`, and `builds`, each `{ version, bitstream }` (a manifest).
        #[arg(long, value_parser = utf8_path())]
        builds: PathBuf,
    },
    /// Convert published data into a results folder.
    Import {
        /// Source format.
        #[arg(value_parser = ["latencylab"])]
        format: String,
        /// Source folder (the LatencyLab repository, containing data/tsc/).
        src: PathBuf,
        /// Results folder to create.
        #[arg(long)]
        out: PathBuf,
        /// Probes per trace (ids outside 1..=N are invalid).
        #[arg(long, default_value_t = 20_000)]
        probes: u64,
    },
    /// Write a results folder in another tool's layout (exit 1 when a run could not be used).
    Export {
        /// Results folder.
        dir: PathBuf,
        /// Layout: latencylab-csv (`data/tsc/{programs,null}/<TAG>_s<n>/f_run<NN>.csv`), or
        /// ro-crate (one zip: the folder's files and its RO-Crate metadata; keys left out).
        #[arg(long, value_enum)]
        format: orchestrator::export::Format,
        /// Folder to write into (latencylab-csv), or the zip (ro-crate); existing files are never
        /// overwritten.
        #[arg(long)]
        out: PathBuf,
    },
    /// Probe traces: generate pcaps, or inspect and verify one.
    Trace {
        #[command(subcommand)]
        op: TraceOp,
    },
    /// Shell completions on stdout (`make install` installs them for bash, zsh and fish).
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// Manual pages: orchestrate(1) and one per subcommand (orchestrate-run(1), …), written
    /// into a folder (`make install` installs them).
    Man {
        /// Folder for the pages (created if missing).
        #[arg(long)]
        out: PathBuf,
    },
    /// JSON Schemas of plans, inventories and bitstream manifests, generated from their decoders
    /// (for editors: yaml-language-server reads the `# yaml-language-server: $schema=…` line).
    Schema {
        /// The schema printed; without it, every schema is written with `--out`.
        #[arg(value_enum, required_unless_present = "out")]
        kind: Option<latency_plan::schema::DocKind>,
        /// Folder for every schema (`<kind>.schema.json`), created if missing.
        #[arg(long, conflicts_with = "kind")]
        out: Option<PathBuf>,
    },
    /// Dry run: every session, step and run with its rendered command, and the predicted duration.
    Plan {
        /// Plan file.
        plan: PathBuf,
        /// `sim` or an inventory file (overrides the plan's `testbed`); several, comma-separated:
        /// the sessions' predicted assignment to that many slices.
        #[arg(long)]
        testbed: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Step costs from what these studies' journals measured (results folders run on the
        /// testbed), instead of the inventory's estimates.
        #[arg(long, num_args = 1..)]
        costs_from: Vec<PathBuf>,
    },
}

#[derive(Subcommand)]
pub(crate) enum HistoryOp {
    /// Add finished studies (results folders, analysed first if needed) to a store (created if
    /// absent); a study there already is left as it is, a damaged one rewritten; a study whose
    /// runs failed or whose summary cannot be trusted is refused.
    Add {
        /// Results folders.
        #[arg(required = true)]
        results: Vec<PathBuf>,
        /// The store: a folder, or `s3://BUCKET[/PREFIX]` (credentials and endpoint from `AWS_*`).
        #[arg(long)]
        store: String,
    },
    /// The studies in a store, one JSON line each (`{"date", "study"}`).
    List {
        /// The store.
        #[arg(long)]
        store: String,
    },
    /// Acknowledge a study as the start of a new level (a new compiler, a new shell): the trend
    /// then reports the change it starts with the reason and judges later nights against it,
    /// never alerting on it. Annotating a study again replaces its reason.
    Annotate {
        /// The study's id, as `history list` gives it.
        study: String,
        /// Why, in words.
        reason: String,
        /// The store.
        #[arg(long)]
        store: String,
    },
}

#[derive(Subcommand)]
pub(crate) enum TraceOp {
    /// Generate a probe trace.
    Generate {
        /// Header template: forward, five_tuple, remove_header, checksum, int (INT-MD over UDP/TCP),
        /// int_gre (INT-MD over GRE).
        #[arg(long, value_enum)]
        template: plan::TraceTemplate,
        /// Number of probes (ids 1..=N), at least 1.
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=i64::from(latency_plan::trace::MAX_PROBES)))]
        count: u32,
        /// Probe id format: latencylab (ASCII marker) or compact (binary).
        #[arg(long, value_enum, default_value_t = plan::ProbeFormat::Latencylab)]
        probe_id: plan::ProbeFormat,
        /// Bytes of every frame without FCS, a VLAN tag included (default 128, 132 tagged).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=i64::from(latency_plan::trace::MAX_FRAME_LEN)))]
        frame_size: Option<u32>,
        /// VLAN id every frame is tagged with, or `none` (default: the template's tagging, VLAN
        /// 100 for remove_header, none for the others).
        #[arg(long, value_parser = parse_vlan)]
        vlan: Option<Vlan>,
        /// IP version: ipv4 or ipv6 (remove_header and checksum only).
        #[arg(long, value_enum, default_value_t = plan::IpVersion::Ipv4)]
        ip: plan::IpVersion,
        /// Transport: udp or tcp.
        #[arg(long, value_enum, default_value_t = plan::Transport::Udp)]
        transport: plan::Transport,
        /// Output pcap (must not exist).
        #[arg(long)]
        out: PathBuf,
    },
    /// Generate every generated trace of a plan, and the stand-in of every absent pcap, into a
    /// folder (`<trace>.pcap`).
    Plan {
        /// Plan file.
        plan: PathBuf,
        /// Output folder.
        #[arg(long)]
        out: PathBuf,
    },
    /// Count and check the probes of a pcap (exit 1 when it has problems, 2 when it is no
    /// readable pcap).
    Inspect {
        /// The pcap.
        file: PathBuf,
        /// Probe id format.
        #[arg(long, value_enum, default_value_t = plan::ProbeFormat::Latencylab)]
        probe_id: plan::ProbeFormat,
    },
}

/// `--vlan`: an id (1..=4094) or `none`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Vlan(pub(crate) Option<u16>);

fn parse_vlan(s: &str) -> Result<Vlan, String> {
    match s {
        "none" => Ok(Vlan(None)),
        _ => match s.parse::<u16>() {
            Ok(v @ 1..=4094) => Ok(Vlan(Some(v))),
            _ => Err(format!("`{s}` is no VLAN id (1..=4094) nor `none`")),
        },
    }
}

/// A path a study records (the plan, its results folder, a model file): the journal and
/// `provenance.json` name it in UTF-8 text, so a path that is not UTF-8 is refused before
/// anything is created.
fn utf8_path() -> impl clap::builder::TypedValueParser<Value = PathBuf> {
    use clap::builder::TypedValueParser;
    clap::builder::OsStringValueParser::new().try_map(|s: std::ffi::OsString| match s.into_string() {
        Ok(s) => Ok(PathBuf::from(s)),
        Err(_) => Err("the path is not valid UTF-8: a study names its plan and results folder in its journal and \
             provenance.json, which are UTF-8 text; rename it"),
    })
}

/// A finite number > 0.
fn positive(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        Ok(_) => Err(format!("`{text}` must be a finite number > 0")),
        Err(e) => Err(format!("`{text}`: {e}")),
    }
}

/// A duration in seconds from `3h`, `90m`, `5400s` or `1h30m`.
fn parse_duration(text: &str) -> Result<f64, String> {
    let mut total = 0.0;
    let mut number = String::new();
    for c in text.chars() {
        match c {
            '0'..='9' | '.' => number.push(c),
            'h' | 'm' | 's' if !number.is_empty() => {
                let v: f64 = number.parse().map_err(|e| format!("`{text}`: {e}"))?;
                total += v * match c {
                    'h' => 3600.0,
                    'm' => 60.0,
                    _ => 1.0,
                };
                number.clear();
            }
            _ => return Err(format!("`{text}` is no duration (e.g. 3h, 90m, 1h30m, 5400s)")),
        }
    }
    if !number.is_empty() || total <= 0.0 {
        return Err(format!("`{text}` is no duration (e.g. 3h, 90m, 1h30m, 5400s)"));
    }
    Ok(total)
}

/// A threshold: a finite number ≥ 0 (NaN would silently disable a check).
fn non_negative(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        Ok(_) => Err(format!("`{text}` must be a finite number ≥ 0")),
        Err(e) => Err(format!("`{text}`: {e}")),
    }
}
