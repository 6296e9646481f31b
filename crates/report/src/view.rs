//! The template context: the summary turned into display-ready strings, so templates only lay
//! things out and every number is formatted once, the same way in HTML and Markdown.

use serde::Serialize;
use serde_json::Value;

use super::format::{NONE, dominant_mode, mode_median, ns, ordered_modes, quantile, session_list, session_modes};
use super::svg::Figure;
use latency_plan::TraceSource;
use latency_results::provenance::Provenance;
use latency_results::summary::Margins;
use latency_results::summary::ProgramSummary;
use latency_results::summary::Summary;
use latency_results::summary::level_key;

/// Context handed to the templates (documented in the module docs of `report`).
#[derive(Serialize)]
pub(super) struct View {
    title: String,
    study: String,
    tool_version: String,
    provenance: Vec<Item>,
    testbed_facts: Vec<Item>,
    bitstreams: Vec<Item>,
    traces: Vec<Item>,
    /// Traces replayed as stand-ins of absent published files, in plain words.
    stand_ins: Vec<String>,
    /// Commands that reproduce the study, with the versions they need.
    reproduce: Vec<String>,
    quantile_columns: Vec<String>,
    table: Vec<Row>,
    has_hw: bool,
    has_multi_mode: bool,
    /// The figures are raw differentials (`analysis.calibration: none`).
    uncalibrated: bool,
    figures: Vec<FigureView>,
    /// Studies with factors: each program's results at every level.
    levels: Vec<super::levels::LevelRow>,
    /// Soak mode: each program's differentials from its runs' HDR histograms.
    soak: Vec<super::soak::SoakRow>,
    /// `sender: agent`: round trips and the one-way estimate.
    round_trips: Vec<super::round_trip::RoundTripRow>,
    /// `analysis.port_pairs`: each pair's differential.
    port_pairs: Vec<super::port_pairs::PortPairRow>,
    /// How the bounds of header-inserting programs were made.
    bound_notes: Vec<String>,
    health: Vec<Item>,
    /// What the analysis could not use or check (unreadable runs, missing nulls, ...).
    problems: Vec<String>,
    programs: Vec<ProgramView>,
    nulls: Vec<NullView>,
    /// Variance components of each program's median and p99, per level.
    variance: Vec<VarianceView>,
    tsc_ghz: String,
    quantile_definition: String,
}

/// A label and its value.
#[derive(Serialize)]
struct Item {
    label: String,
    value: String,
    /// Show in a monospace font (hashes, commits).
    mono: bool,
}

impl Item {
    fn new(label: &str, value: String, mono: bool) -> Item {
        Item { label: label.to_string(), value, mono }
    }
}

/// One row of the Table I equivalent.
#[derive(Serialize)]
struct Row {
    label: String,
    program: String,
    quantiles: Vec<String>,
    median_ci: String,
    bound_ns: String,
    bound_cycles: String,
    median_margin: String,
    p99_margin: String,
    violations: String,
    hw_max_diff: String,
    hw_pass: String,
    /// `Some(pass)` when there is a hardware-clock verdict on this row (for styling).
    hw_ok: Option<bool>,
    /// First row of its program (for visual grouping).
    first: bool,
}

#[derive(Serialize)]
struct FigureView {
    id: String,
    number: usize,
    title: String,
    caption: String,
    /// Inline SVG (no XML namespace; mark `|safe` in HTML templates).
    svg: String,
    /// Path of the SVG file relative to `report.md`.
    file: String,
}

#[derive(Serialize)]
struct ProgramView {
    name: String,
    trace: String,
    bitstream: String,
    null_offset: String,
    reproducibility: String,
    probes: u64,
    excluded: u64,
    multi_mode: bool,
    modes: Vec<Item>,
    /// `1: sessions 1, 3 (median 107.0 ns); 2: …`, or `—` for a single mode.
    modes_text: String,
    sessions: Vec<SessionView>,
    hw: Option<HwView>,
    /// Adaptive sessions: `12 sessions, its stopping rule met: after 12 sessions: …`.
    stopping: Option<String>,
}

#[derive(Serialize)]
struct SessionView {
    session: u32,
    mode: String,
    raw_median: String,
    median: String,
    matched: u64,
    excluded: u64,
    runs: u32,
}

#[derive(Serialize)]
struct HwView {
    pairs: u64,
    max_diff: String,
    tolerance: String,
    pass: bool,
    verdict: String,
    levels: Vec<HwLevelView>,
}

#[derive(Serialize)]
struct HwLevelView {
    level: String,
    measured: String,
    synthesized: String,
    diff: String,
}

#[derive(Serialize)]
struct VarianceView {
    program: String,
    statistic: &'static str,
    session: String,
    run: String,
    probe: String,
    shares: String,
    design: String,
}

/// One row per program and statistic with variance components.
fn variance_views(s: &Summary) -> Vec<VarianceView> {
    let mut out = Vec::new();
    for (name, p) in &s.programs {
        let Some(v) = &p.evidence.variance else { continue };
        for (statistic, c) in [("p50", &v.median), ("p99", &v.p99)] {
            let sh = c.shares();
            out.push(VarianceView {
                program: name.clone(),
                statistic,
                session: format!("{:.3}", c.session_ns2),
                run: format!("{:.3}", c.run_ns2),
                probe: format!("{:.3}", c.probe_ns2),
                shares: format!("{:.0} / {:.0} / {:.0} %", sh.session * 100.0, sh.run * 100.0, sh.probe * 100.0),
                design: format!("{:.0} × {:.1} × {:.0}", c.design.sessions, c.design.runs, c.design.probes),
            });
        }
    }
    out
}

#[derive(Serialize)]
struct NullView {
    trace: String,
    group: String,
    offset: String,
    spread: String,
    sessions: String,
}

/// Build the context.
pub(super) fn build(s: &Summary, figures: &[Figure]) -> View {
    let title =
        if s.title.trim().is_empty() { latency_plan::defaults::report_title(&s.study) } else { s.title.clone() };
    let (provenance, testbed_facts, bitstreams, traces) = provenance(s);
    let mut table = Vec::new();
    let mut programs = Vec::new();
    for (name, p) in &s.programs {
        rows(s, name, p, &mut table);
        programs.push(program_view(name, p));
    }
    let h = &s.health;
    let health = vec![
        Item::new("Runs analysed", h.runs.to_string(), false),
        Item::new("Matched probes", h.matched.to_string(), false),
        Item::new("Pipeline-only probes", h.pipeline_only.to_string(), false),
        Item::new("Bypass-only probes (incl. dropped)", h.bypass_only.to_string(), false),
        Item::new("Duplicated copies", h.duplicates.to_string(), false),
        Item::new("Excluded (first after idle gap)", h.excluded.to_string(), false),
        Item::new("Retries", h.retries.to_string(), false),
        Item::new("Failed runs", h.failed_runs.to_string(), false),
        Item::new(
            "Pacing achieved (min / median / max)",
            format!(
                "{} / {} / {} pps{}",
                ns(h.pacing_pps[0]),
                ns(h.pacing_pps[1]),
                ns(h.pacing_pps[2]),
                if h.pacing_inferred_runs > 0 {
                    format!(
                        " ({} runs inferred from the probe ids, most bypass copies missing)",
                        h.pacing_inferred_runs
                    )
                } else {
                    String::new()
                }
            ),
            false,
        ),
    ];
    let nulls = s
        .nulls
        .iter()
        .map(|(trace, n)| NullView {
            trace: trace.clone(),
            group: n.group.clone(),
            offset: ns(n.offset_ns),
            spread: ns(n.spread_ns),
            sessions: n.sessions.iter().map(|(k, v)| format!("{k}: {}", ns(*v))).collect::<Vec<_>>().join(", "),
        })
        .collect();
    View {
        title,
        study: s.study.clone(),
        tool_version: s.tool_version.clone(),
        provenance,
        testbed_facts,
        bitstreams,
        traces,
        stand_ins: s
            .provenance
            .iter()
            .flat_map(|p| &p.traces)
            .filter_map(|(n, t)| latency_plan::stand_in_note(n, t))
            .collect(),
        reproduce: reproduce(s),
        quantile_columns: s.quantile_levels.iter().map(|&l| level_key(l)).collect(),
        has_hw: s.programs.values().any(|p| p.hw_check.is_some()),
        has_multi_mode: s.programs.values().any(|p| p.modes.len() > 1),
        uncalibrated: s.calibration == latency_plan::Calibration::None,
        table,
        figures: figures
            .iter()
            .enumerate()
            .map(|(i, f)| FigureView {
                id: f.id.to_string(),
                number: i + 1,
                title: f.title.clone(),
                caption: f.caption.clone(),
                svg: f.svg.clone(),
                file: format!("figures/{}.svg", f.id),
            })
            .collect(),
        levels: super::levels::rows(s),
        soak: super::soak::rows(s),
        round_trips: super::round_trip::rows(s),
        port_pairs: super::port_pairs::rows(s),
        bound_notes: s
            .programs
            .iter()
            .filter_map(|(name, p)| {
                let v = p.vendor_bound.as_ref()?;
                let i = v.insertion.as_ref()?;
                let per_len: Vec<String> = i
                    .by_frame_len
                    .iter()
                    .map(|r| {
                        format!(
                            "{} B: {} probes, median {} ns, p99 {} ns against {} cycles, {} above",
                            r.frame_len,
                            r.probes,
                            ns(r.p50_ns),
                            ns(r.p99_ns),
                            r.bound_cycles,
                            r.above_bound
                        )
                    })
                    .collect();
                Some(format!(
                    "{name} inserts headers: its bound is {} base cycles + {} cycles × {} packets in flight ({} B \
                     smallest frame, {}-bit bus) = {} cycles (Xilinx UG1308, as LatencyLab's run_latency.py). Latency \
                     against frame length, each held to the bound for traffic of that length: {}",
                    i.base_cycles,
                    i.insert_cycles,
                    i.in_flight,
                    i.min_frame_bytes,
                    i.bus_bits,
                    v.cycles,
                    if per_len.is_empty() { "no frame lengths recorded".to_owned() } else { per_len.join("; ") }
                ))
            })
            .collect(),
        health,
        problems: s.health.problems.clone(),
        variance: variance_views(s),
        programs,
        nulls,
        tsc_ghz: if s.tsc_hz.is_finite() && s.tsc_hz > 0.0 {
            format!("{:.3}", s.tsc_hz / 1e9)
        } else {
            NONE.to_string()
        },
        quantile_definition: s.quantile_definition.clone(),
    }
}

/// Table rows of one program: one per reset mode.
fn rows(s: &Summary, name: &str, p: &ProgramSummary, out: &mut Vec<Row>) {
    let modes = ordered_modes(p);
    let dominant = dominant_mode(p, &modes);
    // A program without mode entries still gets its row.
    let count = modes.len().max(1);
    for i in 0..count {
        let mode = modes.get(i).copied();
        let is_dominant = dominant.is_none_or(|d| d == i);
        let (label, q) = match mode {
            Some(m) if modes.len() > 1 => (format!("{name} (sessions {})", session_list(&m.sessions)), &m.latency_ns),
            _ => (name.to_string(), &p.latency_ns),
        };
        let quantiles = s.quantile_levels.iter().map(|&l| quantile(q, l)).collect();
        let median_ci = if is_dominant && p.median_ci95_ns.iter().any(|v| v.is_finite()) {
            format!("[{}, {}]", ns(p.median_ci95_ns[0]), ns(p.median_ci95_ns[1]))
        } else {
            NONE.to_string()
        };
        let (bound_ns, bound_cycles, median_margin, p99_margin, violations) = match &p.vendor_bound {
            Some(b) if is_dominant => (
                ns(b.ns),
                b.cycles.to_string(),
                ns(b.median_margin_cycles),
                ns(b.p99_margin_cycles),
                b.violations.to_string(),
            ),
            // Other modes: their own margins; violations are counted over all the program's probes
            // and shown once.
            Some(b) => {
                let m = mode.and_then(|m| m.margins);
                let show = |f: fn(&Margins) -> f64| m.as_ref().map_or_else(|| NONE.to_string(), |m| ns(f(m)));
                (ns(b.ns), b.cycles.to_string(), show(|m| m.median_cycles), show(|m| m.p99_cycles), NONE.to_string())
            }
            None => (NONE.to_string(), NONE.to_string(), NONE.to_string(), NONE.to_string(), NONE.to_string()),
        };
        let (hw_max_diff, hw_pass, hw_ok) = match &p.hw_check {
            Some(h) if is_dominant => {
                (ns(h.max_diff_ns), if h.pass { "pass" } else { "FAIL" }.to_string(), Some(h.pass))
            }
            _ => (NONE.to_string(), NONE.to_string(), None),
        };
        out.push(Row {
            label,
            program: name.to_string(),
            quantiles,
            median_ci,
            bound_ns,
            bound_cycles,
            median_margin,
            p99_margin,
            violations,
            hw_max_diff,
            hw_pass,
            hw_ok,
            first: i == 0,
        });
    }
}

fn program_view(name: &str, p: &ProgramSummary) -> ProgramView {
    let modes = ordered_modes(p);
    let of_session = session_modes(&modes);
    let multi_mode = modes.len() > 1;
    let modes_text = if multi_mode {
        modes
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let share = match (m.frequency, m.frequency_ci95) {
                    (Some(f), Some([lo, hi])) => {
                        format!(", {:.0} % of bring-ups, 95 % CI {:.0}–{:.0} %", f * 100.0, lo * 100.0, hi * 100.0)
                    }
                    _ => String::new(),
                };
                format!("{}: sessions {} (median {} ns{share})", i + 1, session_list(&m.sessions), ns(mode_median(m)))
            })
            .collect::<Vec<_>>()
            .join("; ")
    } else {
        NONE.to_string()
    };
    ProgramView {
        name: name.to_string(),
        stopping: p.stopping.as_ref().map(|st| {
            format!(
                "{} sessions, {}: {}",
                st.sessions,
                if st.rule_met { "its stopping rule met" } else { "the most it may take, its stopping rule not met" },
                st.detail
            )
        }),
        modes_text,
        trace: p.trace.clone(),
        bitstream: p.bitstream.clone(),
        null_offset: ns(p.null_offset_ns),
        reproducibility: ns(p.reproducibility_ns),
        probes: p.probes,
        excluded: p.excluded,
        multi_mode,
        modes: modes
            .iter()
            .enumerate()
            .map(|(i, m)| {
                Item::new(
                    &format!("mode {}", i + 1),
                    format!("sessions {}; median {} ns", session_list(&m.sessions), ns(mode_median(m))),
                    false,
                )
            })
            .collect(),
        sessions: p
            .sessions
            .iter()
            .map(|s| SessionView {
                session: s.session,
                mode: of_session.get(&s.session).map_or_else(|| NONE.to_string(), |i| (i + 1).to_string()),
                raw_median: ns(s.raw_median_ns),
                median: ns(s.median_ns),
                matched: s.matched,
                excluded: s.excluded,
                runs: s.runs,
            })
            .collect(),
        hw: p.hw_check.as_ref().map(|h| HwView {
            pairs: h.pairs,
            max_diff: ns(h.max_diff_ns),
            tolerance: ns(h.tolerance_ns),
            pass: h.pass,
            verdict: if h.pass { "pass" } else { "FAIL" }.to_string(),
            levels: h
                .levels
                .iter()
                .map(|l| HwLevelView {
                    level: level_key(l.level),
                    measured: ns(l.measured_ns),
                    synthesized: ns(l.synthesized_ns),
                    diff: ns(l.diff_ns),
                })
                .collect(),
        }),
    }
}

/// A fact as text: strings as they are, other JSON as compact JSON, null as the placeholder.
fn show(v: &Value) -> String {
    match v {
        Value::Null => NONE.to_string(),
        Value::String(s) if s.is_empty() => NONE.to_string(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The commands that make the study again: the tool's commit, then the run (or the import) with
/// the testbed and seed it had.
fn reproduce(s: &Summary) -> Vec<String> {
    let Some(p) = &s.provenance else {
        return vec![format!(
            "# no provenance.json: the study's commands are unknown (orchestrate {})",
            s.tool_version
        )];
    };
    let mut out = vec![format!("# orchestrate {}, plan sha256 {}", p.tool_version, p.plan_hash)];
    match p.git_commit.strip_suffix("-dirty") {
        Some(commit) => out.push(format!("git checkout {commit}   # the study ran with local changes on top of it")),
        None if !p.git_commit.is_empty() => out.push(format!("git checkout {}", p.git_commit)),
        None => {}
    }
    match &p.import {
        Some(i) => {
            out.push(format!("orchestrate import latencylab {} --out DIR --probes {}", i.source.display(), i.probes))
        }
        None => {
            let plan = p.plan_file.as_ref().map_or_else(|| "plan.yaml".to_string(), |f| f.display().to_string());
            let testbed = if p.testbed.name == "sim" {
                "sim".to_string()
            } else {
                format!("INVENTORY   # testbed {}", p.testbed.name)
            };
            out.push(format!("orchestrate run {plan} --seed {} --out DIR --testbed {testbed}", p.seed));
        }
    }
    out
}

/// A fact as rows `a.b.c = value`: nested objects spelled out key by key, so that a model's
/// parameters read as a table rather than one line of JSON.
fn flatten(key: &str, v: &Value, out: &mut Vec<Item>) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, v) in m {
                flatten(&format!("{key}.{k}"), v, out);
            }
        }
        other => out.push(Item::new(key, show(other), false)),
    }
}

/// Text or the placeholder.
fn text(s: &str) -> String {
    if s.is_empty() { NONE.to_string() } else { s.to_string() }
}

type ProvenanceParts = (Vec<Item>, Vec<Item>, Vec<Item>, Vec<Item>);

/// Provenance essentials (placeholders for a summary computed without provenance).
fn provenance(s: &Summary) -> ProvenanceParts {
    let p = s.provenance.as_ref();
    let field = |f: fn(&Provenance) -> String| p.map_or_else(|| NONE.to_string(), |p| text(&f(p)));
    let mut tool = field(|p| p.tool_version.clone());
    if tool == NONE {
        tool = s.tool_version.clone();
    } else if !s.tool_version.is_empty() && tool != s.tool_version {
        tool = format!("{tool} (analysed with {})", s.tool_version);
    }
    let tsc = [Some(s.tsc_hz), p.map(|p| p.tsc_hz)].into_iter().flatten().find(|hz| hz.is_finite() && *hz > 0.0);
    let mut items = vec![
        Item::new("Study", s.study.clone(), false),
        Item::new("Plan hash", field(|p| p.plan_hash.clone()), true),
        Item::new("Git commit", field(|p| p.git_commit.clone()), true),
        Item::new("Tool version", tool, false),
        Item::new("Testbed", field(|p| p.testbed.name.clone()), false),
        Item::new("Seed", field(|p| p.seed.to_string()), true),
        Item::new("TSC rate", tsc.map_or_else(|| NONE.to_string(), |hz| format!("{:.3} GHz", hz / 1e9)), false),
        Item::new("Started", field(|p| p.started.clone()), false),
        Item::new("Ended", field(|p| p.ended.clone().unwrap_or_default()), false),
    ];
    let Some(p) = p else { return (items, Vec::new(), Vec::new(), Vec::new()) };
    items.push(Item::new("Sessions / runs planned", format!("{} / {}", p.sessions, p.runs), false));
    let mut facts = Vec::new();
    // Shown as the provenance writes them: every fact, flattened in key order.
    if let Ok(serde_json::Value::Object(written)) = serde_json::to_value(&p.testbed.facts) {
        for (k, v) in &written {
            flatten(k, v, &mut facts);
        }
    }
    let bitstreams = p
        .bitstreams
        .iter()
        .map(|(name, b)| {
            let role = if b.null && !name.contains("null") { " (null)" } else { "" };
            Item::new(&format!("{name}{role}"), text(&b.sha256), true)
        })
        .collect();
    let traces = p
        .traces
        .iter()
        .map(|(name, t)| match t {
            TraceSource::Pcap { sha256: Some(h), .. } => Item::new(name, h.clone(), true),
            TraceSource::Pcap { path, sha256: None } => Item::new(name, path.display().to_string(), false),
            TraceSource::Generate(g) => Item::new(name, format!("generated: {}", g.describe()), false),
            TraceSource::StandIn { pcap, generate, .. } => {
                Item::new(name, format!("stand-in for {} (not here): {}", pcap.display(), generate.describe()), false)
            }
        })
        .collect();
    (items, facts, bitstreams, traces)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_have_one_decimal_and_no_negative_zero() {
        assert_eq!(ns(92.0), "92.0");
        assert_eq!(ns(106.96), "107.0");
        assert_eq!(ns(-0.0), "0.0");
        assert_eq!(ns(f64::NAN), NONE);
    }

    #[test]
    fn session_lists_shorten_runs() {
        assert_eq!(session_list(&[3, 1]), "1, 3");
        assert_eq!(session_list(&[1, 2, 3, 4, 5]), "1–5");
        assert_eq!(session_list(&[1, 2, 4, 6, 7, 8, 10]), "1, 2, 4, 6–8, 10");
        assert_eq!(session_list(&[]), "");
    }

    #[test]
    fn show_handles_missing_and_scalars() {
        assert_eq!(show(&Value::Null), NONE);
        assert_eq!(show(&Value::from(42)), "42");
        assert_eq!(show(&Value::from("abc")), "abc");
        assert_eq!(text(""), NONE);
    }
}
