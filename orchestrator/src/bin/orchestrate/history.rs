//! `orchestrate history` and `orchestrate trend`: the results history in a store. Only adding
//! (`history add`, `nightly`) creates a store; reading one that is not there is an error.

use std::path::Path;

use latency_history::store::Store;
use latency_history::store::StoreError;
use latency_history::trend;
use latency_history::trend::{Gates, Trend};
use orchestrator::exit::ExitStatus;

use crate::Failure;
use crate::cli::{HistoryOp, RunArgs};
use crate::json_line;
use crate::open_locked;
use crate::print_out;
use crate::progress;

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Failure {
        Failure::Exit((&e).into(), e.to_string())
    }
}

pub(crate) fn history(op: HistoryOp) -> Result<(), Failure> {
    match op {
        HistoryOp::Add { results, store } => {
            let store = Store::create(&store)?;
            for dir in &results {
                add(&store, dir)?;
            }
            Ok(())
        }
        HistoryOp::List { store } => {
            for key in Store::open(&store)?.studies()? {
                print_out(&json_line(&key)?)?;
            }
            Ok(())
        }
        HistoryOp::Annotate { study, reason, store } => {
            let key = Store::open(&store)?.annotate(&study, &reason)?;
            eprintln!("{} ({}): acknowledged: {reason}", key.study, key.date);
            Ok(())
        }
    }
}

/// Add one results folder to `store` (under the folder's lock), saying what was done; the study's
/// id.
pub(crate) fn add(store: &Store, dir: &Path) -> Result<String, Failure> {
    let (rd, _lock) = open_locked(dir)?;
    let added = store.add(&rd)?;
    if added.already {
        progress(format_args!("history: {} is in {} already; nothing written", added.key.study, store.url()));
    } else if !added.repaired.is_empty() {
        progress(format_args!(
            "history: {} was in {} with damaged tables; rewrote its {} ({})",
            added.key.study,
            store.url(),
            added.repaired.join(" and "),
            added.damage.join("; ")
        ));
    } else {
        progress(format_args!(
            "history: added {} ({} rows, {} probe estimates) to {}",
            added.key.study,
            added.rows,
            added.estimates,
            store.url()
        ));
    }
    print_out(&json_line(&added)?)?;
    Ok(added.key.study)
}

/// Where `trend` writes its listing.
pub(crate) enum Listing<'a> {
    /// JSON on stdout.
    Json,
    /// Markdown into the file, or on stdout.
    Markdown(Option<&'a Path>),
}

/// The trend of `store`: its listing, the HTML page and JUnit when asked; a regression is
/// [`ExitStatus::ChecksFailed`].
pub(crate) fn trend(
    store: &str,
    gates: Gates,
    listing: Listing<'_>,
    html: Option<&Path>,
    junit: Option<&Path>,
) -> Result<(), Failure> {
    let s = Store::open(store)?;
    write_trend(&s, &judge(&s, gates)?, listing, html, junit, latency_results::write_output)
}

/// How the trend's files are written: a user's output path ([`latency_results::write_output`]),
/// or a file of the study's own results folder (`nightly`).
type Writer = fn(&Path, &[u8]) -> Result<(), latency_results::ResultsError>;

/// The trend of the store's history, judged by `gates`.
fn judge(s: &Store, gates: Gates) -> Result<Trend, Failure> {
    let rows = s.rows().map_err(|e| {
        let damaged = e.is_damaged_table();
        let mut f = Failure::from(e);
        if damaged && let Failure::Exit(_, message) = &mut f {
            message.push_str(&format!(
                "\n  adding its study's results folder again (`orchestrate history add DIR --store {}`) rewrites it",
                s.url()
            ));
        }
        f
    })?;
    let t = trend::trend(&rows, &s.annotations()?, &s.confirmations()?, gates);
    for l in &t.left_out {
        eprintln!(
            "trend: {} ({}) left out: {} failed run(s), {} problem(s); a study whose runs failed is never judged on",
            l.study, l.time, l.failed_runs, l.problems
        );
    }
    Ok(t)
}

fn write_trend(
    s: &Store,
    t: &Trend,
    listing: Listing<'_>,
    html: Option<&Path>,
    junit: Option<&Path>,
    write: Writer,
) -> Result<(), Failure> {
    use latency_report::trend as page;
    let fail = |e: String| Failure::Exit(ExitStatus::Results, e);
    match listing {
        Listing::Json => print_out(&(serde_json::to_string_pretty(t).map_err(|e| fail(e.to_string()))? + "\n"))?,
        Listing::Markdown(to) => {
            let text = page::markdown(t, s.url()).map_err(|e| fail(e.to_string()))?;
            match to {
                Some(path) => write(path, text.as_bytes())?,
                None => print_out(&text)?,
            }
        }
    }
    if let Some(path) = html {
        let text = page::html(t, s.url()).map_err(|e| fail(e.to_string()))?;
        write(path, text.as_bytes())?;
        progress(format_args!("trend page: {}", path.display()));
    }
    if let Some(path) = junit {
        let xml = page::junit(t).map_err(|e| fail(e.to_string()))?;
        write(path, xml.as_bytes())?;
    }
    for (s, n) in t.series.iter().filter_map(|s| s.noisy.map(|n| (s, n))) {
        eprintln!(
            "too noisy: {} {} {}: shifts under {:.1} ns are not told from noise; {} nights at a new level or {} sessions a night would tell one of the threshold",
            s.identity.name, s.program, s.statistic, n.detectable_ns, n.nights_needed, n.sessions_needed
        );
    }
    for c in t.changes.iter().filter(|c| c.latest && c.judgement == trend::Judgement::Regression && !c.regression) {
        eprintln!("unconfirmed: {}", page::describe(c));
    }
    for c in t.regressions() {
        eprintln!("regression: {}", page::describe(c));
    }
    if t.regressions().next().is_some() { Err(Failure::Exit(ExitStatus::ChecksFailed, String::new())) } else { Ok(()) }
}

/// `orchestrate nightly`: the store is opened first (a wrong URL stops before the study); the
/// study runs; a study whose runs failed is neither added nor judged ([`ExitStatus::Unjudged`]);
/// else it is added, and the trend judged; where the plan confirms (`trend.confirm`), the
/// programs of a night that regressed are measured again by a confirmation study, added and
/// recorded as such, before the trend is judged again and written into the night's folder.
pub(crate) fn nightly(args: &RunArgs, store: &str) -> Result<(), Failure> {
    let store = Store::create(store)?;
    // The plan's reference (`regression.baseline`) is checked before a night is spent.
    let (plan, _) = crate::slices::load(&args.plan, args.testbed.as_deref())?;
    let baseline = plan.regression.as_ref().map(|r| r.baseline.clone());
    if let Some(b) = &baseline {
        crate::check_ended(latency_analysis::compare::Role::Baseline, b).map_err(|e| match e {
            Failure::Usage(m) | Failure::Exit(_, m) => Failure::Usage(format!(
                "`regression.baseline` of {}: {m}; nothing was run (run the baseline's study first)",
                args.plan.display()
            )),
            e => e,
        })?;
    }
    let gates = Gates::of_plan(Some(&plan));
    let (dir, passed) = crate::run::run_plan(args)?;
    if !passed {
        return Err(Failure::Exit(
            ExitStatus::Unjudged,
            format!("{}: runs failed their checks; the study is not added to the history", dir.display()),
        ));
    }
    let night = add(&store, &dir)?;
    let against_baseline = match &baseline {
        Some(b) => {
            let crate::Judged { cmp, baseline, candidate } = crate::judge(b, &dir, [None; 3])?;
            let md = latency_analysis::compare::markdown(&cmp);
            latency_results::write_file(&dir.join("compare.md"), md.as_bytes(), true)?;
            latency_results::write_file(&dir.join("compare.xml"), crate::compare_junit(&cmp)?.as_bytes(), true)?;
            let page = latency_report::compare::html(&cmp, &baseline, &candidate)
                .map_err(|e| Failure::Exit(ExitStatus::Results, e.to_string()))?;
            latency_results::write_file(&dir.join("compare.html"), page.as_bytes(), true)?;
            crate::print_out(&md)?;
            cmp.regressed()
        }
        None => false,
    };
    let mut t = judge(&store, gates)?;
    if let Some(confirm) = plan.trend.as_ref().and_then(|t| t.confirm.as_ref()) {
        let programs = t.unconfirmed(&night);
        if !programs.is_empty() {
            confirm_night(args, &plan, confirm, &programs, &store, &night, &dir)?;
            t = judge(&store, gates)?;
        }
    }
    let trend = write_trend(
        &store,
        &t,
        Listing::Markdown(Some(&dir.join("trend.md"))),
        Some(&dir.join("trend.html")),
        Some(&dir.join("trend.xml")),
        |path, bytes| latency_results::write_file(path, bytes, true),
    );
    match trend {
        Ok(()) if against_baseline => Err(Failure::Exit(
            ExitStatus::ChecksFailed,
            format!("regression against the plan's baseline (compare.md in {})", dir.display()),
        )),
        other => other,
    }
}

/// Measure `programs` of night `night` (results in `dir`) again: the plan narrowed to them with
/// `confirm.sessions`, another seed, results in `dir/confirmation`; added to the store and
/// recorded as the night's confirmation. A confirmation predicted longer than
/// `confirm.max_minutes`, or whose runs failed, is not recorded: the regression stays unconfirmed.
fn confirm_night(
    args: &RunArgs,
    plan: &latency_plan::Plan,
    confirm: &latency_plan::Confirm,
    programs: &[String],
    store: &Store,
    night: &str,
    dir: &Path,
) -> Result<(), Failure> {
    let keep: Vec<&str> = programs.iter().map(String::as_str).collect();
    let text = latency_plan::subset::subset(&plan.path, &plan.source, &keep, confirm.sessions)
        .map_err(|e| Failure::Usage(format!("confirmation of {night}: {e}")))?;
    let derived = crate::run::DerivedPlan::write(plan, "confirm", &text)?;
    let (narrowed, inventories) = crate::slices::load(derived.path(), args.testbed.as_deref())?;
    let schedule = latency_schedule::expand(&narrowed, inventories[0].as_ref())
        .map_err(|e| Failure::Invalid(vec![e.diagnostic()]))?;
    let minutes = schedule.predicted_seconds.total / 60.0;
    if minutes > confirm.max_minutes {
        eprintln!(
            "confirmation of {night} ({}): predicted {minutes:.1} min, over `trend.confirm.max_minutes` {}; not run, the regression stays unconfirmed",
            programs.join(", "),
            confirm.max_minutes
        );
        return Ok(());
    }
    progress(format_args!("confirmation of {night}: {} again, {minutes:.1} min predicted", programs.join(", ")));
    let out = dir.join("confirmation");
    let seed = args.seed.unwrap_or(plan.protocol.seed).wrapping_add(1);
    let confirm_args =
        RunArgs { plan: derived.path().to_path_buf(), out: Some(out), resume: false, seed: Some(seed), ..args.clone() };
    let (out, passed) = crate::run::run_plan(&confirm_args)?;
    drop(derived);
    if !passed {
        eprintln!(
            "confirmation of {night}: runs failed their checks ({}); the regression stays unconfirmed",
            out.display()
        );
        return Ok(());
    }
    let by = add(store, &out)?;
    store.confirm(&by, night)?;
    progress(format_args!("confirmation {by} of {night} recorded"));
    Ok(())
}
