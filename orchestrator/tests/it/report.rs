//! Report rendering from a hand-built summary: exact numbers in the Markdown table, a
//! self-contained HTML file with one inline SVG per figure, template overrides, partial
//! provenance, and a headless-Chromium render of the HTML without console errors.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::tmp_dir;
use latency_plan::Analysis;
use latency_plan::Generated;
use latency_plan::ProbeFormat;
use latency_plan::ReportFormat;
use latency_plan::ReportSpec;
use latency_plan::TraceSource;
use latency_plan::TraceTemplate;
use latency_report::ReportError;
use latency_report::render;
use latency_results::provenance::BitstreamFacts;
use latency_results::provenance::Provenance;
use latency_results::provenance::TestbedFacts;
use latency_results::summary::Health;
use latency_results::summary::Histogram;
use latency_results::summary::HwCheck;
use latency_results::summary::HwLevel;
use latency_results::summary::Margins;
use latency_results::summary::Mode;
use latency_results::summary::NullSummary;
use latency_results::summary::ProgramSummary;
use latency_results::summary::Quantiles;
use latency_results::summary::SessionSummary;
use latency_results::summary::Summary;
use latency_results::summary::VendorBound;

const LEVELS: [f64; 6] = [5.0, 25.0, 50.0, 75.0, 95.0, 99.0];

fn provenance() -> Provenance {
    let bitstream = |sha256: &str, null: bool| BitstreamFacts {
        sha256: sha256.into(),
        file: PathBuf::from("bitstreams/bin/x.mcs"),
        present: false,
        manifest: PathBuf::from("bitstreams/x.yaml"),
        clock_mhz: 250.0,
        vendor_bound_cycles: None,
        null,
    };
    Provenance {
        study: "u280-smoke".into(),
        plan_hash: "3f9a1c0d5e".into(),
        plan_file: None,
        tool_version: "0.1.0".into(),
        git_commit: "9a4b58d-dirty".into(),
        seed: 42,
        testbed: TestbedFacts {
            name: "oct-u280".into(),
            facts: latency_results::provenance::Facts {
                extra: BTreeMap::from([("nic".into(), "Alveo U280".into()), ("cpu".into(), "EPYC 7302P".into())]),
                ..Default::default()
            },
        },
        tsc_hz: 2_100_000_000.0,
        bitstreams: BTreeMap::from([
            ("checksum".into(), bitstream("c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00", false)),
            ("five_tuple".into(), bitstream("feedbeef", false)),
            ("null".into(), bitstream("", true)),
        ]),
        traces: BTreeMap::from([
            ("imix".into(), TraceSource::Pcap { path: "traces/imix.pcap".into(), sha256: Some("abcdef0123".into()) }),
            (
                "udp64".into(),
                TraceSource::Generate(Generated::new(TraceTemplate::Forward, 20_000, ProbeFormat::Latencylab)),
            ),
        ]),
        groups: Vec::new(),
        levels: Vec::new(),
        analysis: Analysis::default(),
        report: ReportSpec::default(),
        regression: None,
        sessions: 6,
        runs: 60,
        started: "2025-05-01T10:00:00Z".into(),
        resumed: Vec::new(),
        ended: Some("2025-05-01T16:30:00Z".into()),
        import: None,
        sender: latency_plan::Sender::Tcpreplay,
    }
}

fn quantiles(values: [f64; 6]) -> Quantiles {
    LEVELS.iter().copied().zip(values).collect()
}

/// A bell of `n` probes around `centre` (1 ns bins starting at `start`).
fn bell(counts: &mut [u64], start: f64, centre: f64, sigma: f64, n: f64) {
    for (k, c) in counts.iter_mut().enumerate() {
        let x = start + k as f64 + 0.5;
        let z = (x - centre) / sigma;
        *c += (n * (-0.5 * z * z).exp() / (sigma * (2.0 * std::f64::consts::PI).sqrt())).round() as u64;
    }
}

fn session(session: u32, raw: f64, median: f64) -> SessionSummary {
    SessionSummary {
        session,
        raw_median_ns: raw,
        median_ns: median,
        matched: 199_990,
        excluded: 10,
        runs: 10,
        hw_median_ns: None,
    }
}

fn summary() -> Summary {
    let mut ft_counts = vec![0; 90];
    bell(&mut ft_counts, 80.0, 107.0, 9.0, 400_000.0);
    bell(&mut ft_counts, 80.0, 137.0, 9.0, 200_000.0);
    let five_tuple = ProgramSummary {
        level: None,
        levels: Vec::new(),
        trace: "imix".into(),
        null_trace: None,
        bitstream: "five_tuple".into(),
        latency_ns: quantiles([92.0, 101.0, 107.0, 112.0, 120.0, 127.0]),
        latency_raw_ns: Default::default(),
        evidence: Default::default(),
        modes: vec![
            // Deliberately listed high mode first: the report orders modes by median.
            // Margins by hand: 53 − 137 × 0.25 = 18.75 and 53 − 159 × 0.25 = 13.25 cycles.
            Mode {
                sessions: vec![2],
                latency_ns: quantiles([124.0, 131.0, 137.0, 143.0, 152.0, 159.0]),
                margins: Some(Margins { median_cycles: 18.75, p99_cycles: 13.25 }),
                latency_raw_ns: Default::default(),
                gap_below: None,
                median_ci95_ns: None,
                p99_ci95_ns: None,
                frequency: None,
                frequency_ci95: None,
            },
            Mode {
                sessions: vec![1, 3],
                latency_ns: quantiles([92.0, 101.0, 107.0, 112.0, 120.0, 127.0]),
                margins: Some(Margins { median_cycles: 26.25, p99_cycles: 21.25 }),
                latency_raw_ns: Default::default(),
                gap_below: None,
                median_ci95_ns: None,
                p99_ci95_ns: None,
                frequency: None,
                frequency_ci95: None,
            },
        ],
        sessions: vec![session(1, 125.3, 107.1), session(2, 155.2, 137.0), session(3, 124.9, 106.7)],
        null_offset_ns: 18.2,
        reproducibility_ns: 0.4,
        vendor_bound: Some(VendorBound {
            insertion: None,
            clock_mhz: 250.0,
            cycles: 53,
            ns: 212.0,
            median_cycles: 26.75,
            median_margin_cycles: 26.25,
            p99_margin_cycles: 21.25,
            violations: 0,
            worst_mode: None,
        }),
        median_ci95_ns: [106.8, 107.2],
        p99_ci95_ns: [126.1, 128.0],
        hw_check: None,
        probes: 599_970,
        excluded: 30,
        histogram: Histogram { start_ns: 80.0, bin_ns: 1.0, counts: ft_counts },
        soak: None,
        round_trip: None,
        stopping: None,
        port_pairs: Default::default(),
    };
    let mut ck_counts = vec![0; 60];
    bell(&mut ck_counts, 335.0, 364.0, 8.0, 1_000_000.0);
    let checksum_q = quantiles([349.0, 358.0, 364.0, 370.0, 377.0, 381.0]);
    let hw_levels = [(5.0, 360.2, 361.0), (25.0, 369.8, 370.3), (50.0, 375.9, 375.1), (75.0, 381.7, 382.9)]
        .into_iter()
        .chain([(95.0, 389.0, 390.4), (99.0, 393.5, 395.2)])
        .map(|(level, m, s)| HwLevel {
            level,
            measured_ns: m,
            synthesized_ns: s,
            diff_ns: s - m,
            judged: level <= 95.0,
        })
        .collect();
    let checksum = ProgramSummary {
        level: None,
        levels: Vec::new(),
        trace: "udp64".into(),
        null_trace: None,
        bitstream: "checksum".into(),
        latency_ns: checksum_q.clone(),
        latency_raw_ns: Default::default(),
        evidence: Default::default(),
        modes: vec![Mode {
            sessions: vec![1, 2, 3, 4, 5],
            latency_ns: checksum_q,
            margins: Some(Margins { median_cycles: 109.0 - 91.0, p99_cycles: 109.0 - 95.25 }),
            latency_raw_ns: Default::default(),
            gap_below: None,
            median_ci95_ns: None,
            p99_ci95_ns: None,
            frequency: None,
            frequency_ci95: None,
        }],
        sessions: vec![
            session(1, 390.1, 364.2),
            session(2, 389.6, 363.7),
            session(3, 390.9, 365.0),
            session(4, 389.8, 363.9),
            session(5, 390.3, 364.4),
        ],
        null_offset_ns: 26.0,
        reproducibility_ns: 1.3,
        vendor_bound: Some(VendorBound {
            insertion: None,
            clock_mhz: 250.0,
            cycles: 109,
            ns: 436.0,
            median_cycles: 91.0,
            median_margin_cycles: 18.0,
            p99_margin_cycles: 13.75,
            violations: 2,
            worst_mode: None,
        }),
        median_ci95_ns: [363.8, 364.3],
        p99_ci95_ns: [380.2, 381.9],
        hw_check: Some(HwCheck { levels: hw_levels, max_diff_ns: 1.7, tolerance_ns: 5.0, pass: true, pairs: 19_850 }),
        probes: 999_950,
        excluded: 50,
        histogram: Histogram { start_ns: 335.0, bin_ns: 1.0, counts: ck_counts },
        soak: None,
        round_trip: None,
        stopping: None,
        port_pairs: Default::default(),
    };
    let nulls = BTreeMap::from([
        (
            "imix".to_string(),
            NullSummary {
                group: "null-imix".into(),
                offset_ns: 18.2,
                offset_raw_ns: 18.2,
                sessions: vec![(1, 18.0), (2, 18.6), (3, 17.9)],
                spread_ns: 0.7,
            },
        ),
        (
            "udp64".to_string(),
            NullSummary {
                group: "null-udp64".into(),
                offset_ns: 26.0,
                offset_raw_ns: 26.0,
                sessions: vec![(1, 25.8), (2, 26.3), (3, 26.1), (4, 25.6), (5, 26.0)],
                spread_ns: 0.7,
            },
        ),
    ]);
    Summary {
        study: "u280-smoke".into(),
        title: "U280 P4 latency (smoke test)".into(),
        tool_version: "0.1.0".into(),
        tsc_hz: 2_100_000_000.0,
        quantile_levels: LEVELS.to_vec(),
        quantile_definition: "Hyndman–Fan type 7 (linear interpolation between order statistics)".into(),
        calibration: Default::default(),
        programs: BTreeMap::from([("checksum".to_string(), checksum), ("five_tuple".to_string(), five_tuple)]),
        nulls,
        health: Health {
            runs: 90,
            matched: 1_799_860,
            pipeline_only: 3,
            bypass_only: 11,
            duplicates: 1,
            excluded: 80,
            retries: 2,
            failed_runs: 0,
            pacing_pps: [499.2, 500.0, 500.4],
            pacing_inferred_runs: 0,
            problems: Vec::new(),
        },
        provenance: Some(provenance()),
        inputs_sha256: String::new(),
    }
}

fn both() -> [ReportFormat; 2] {
    [ReportFormat::Html, ReportFormat::Markdown]
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap()
}

#[test]
fn markdown_table_has_the_exact_numbers() {
    let dir = tmp_dir("md");
    let written = render(&summary(), &both(), None, &dir).unwrap();
    assert!(written.contains(&dir.join("report.md")));
    assert!(written.contains(&dir.join("report.html")));
    let md = read(&dir.join("report.md"));
    let rows = [
        "| checksum | 349.0 | 358.0 | 364.0 | 370.0 | 377.0 | 381.0 | [363.8, 364.3] | 436.0 | 109 | 18.0 | 13.8 | 2 | 1.7 | pass |",
        "| five_tuple (sessions 1, 3) | 92.0 | 101.0 | 107.0 | 112.0 | 120.0 | 127.0 | [106.8, 107.2] | 212.0 | 53 | 26.2 | 21.2 | 0 | — | — |",
        // The other mode: margins from its own quantiles (53 − 137 × 0.25 = 18.75, 53 − 159 × 0.25 = 13.25).
        "| five_tuple (sessions 2) | 124.0 | 131.0 | 137.0 | 143.0 | 152.0 | 159.0 | — | 212.0 | 53 | 18.8 | 13.2 | — | — | — |",
    ];
    for row in rows {
        assert!(md.contains(row), "missing row {row}\n{md}");
    }
    // Modes sorted by median: the low mode's row comes first.
    assert!(md.find(rows[1]).unwrap() < md.find(rows[2]).unwrap());
    assert!(md.contains("| Plan hash | `3f9a1c0d5e` |"));
    assert!(md.contains("| TSC rate | 2.100 GHz |"));
    assert!(md.contains("| Pacing achieved (min / median / max) | 499.2 / 500.0 / 500.4 pps |"));
    assert!(md.contains("| five_tuple | 2 | 2 | 155.2 | 137.0 | 199990 | 10 | 10 |"), "session row with mode\n{md}");
    assert!(md.contains("| five_tuple | imix | five_tuple | 18.2 | 599970 | 30 | 0.4 | 1: sessions 1, 3 (median 107.0 ns); 2: sessions 2 (median 137.0 ns) |"));
    assert!(md.contains("| imix | null-imix | 18.2 | 0.7 | 1: 18.0, 2: 18.6, 3: 17.9 |"));
    assert!(md.contains("| p50 | 375.9 | 375.1 | -0.8 |"));
    assert!(md.contains("Hyndman–Fan type 7"));
}

#[test]
fn markdown_figures_are_separate_files_referenced_relatively() {
    let dir = tmp_dir("md-figures");
    let written = render(&summary(), &[ReportFormat::Markdown], None, &dir).unwrap();
    let md = read(&dir.join("report.md"));
    for id in ["latency-distribution", "hw-clock-check", "session-medians", "null-offsets"] {
        let file = dir.join("figures").join(format!("{id}.svg"));
        assert!(written.contains(&file), "{id} not reported as written");
        let svg = read(&file);
        assert!(svg.starts_with("<?xml"), "{id}");
        assert!(svg.contains("xmlns=\"http://www.w3.org/2000/svg\""), "{id}");
        assert!(md.contains(&format!("](figures/{id}.svg)")), "{id} not referenced");
    }
    assert!(!dir.join("report.html").exists(), "only the formats asked for are written");
}

#[test]
fn html_is_self_contained_with_one_svg_per_figure() {
    let dir = tmp_dir("html");
    render(&summary(), &both(), None, &dir).unwrap();
    let html = read(&dir.join("report.html"));
    assert!(!html.to_lowercase().contains("<script"), "no scripts");
    for needle in ["http://", "https://", "url(", "@import", "<link", "<img", "<iframe"] {
        assert!(!html.contains(needle), "external reference {needle:?} in report.html");
    }
    let figures = html.matches("<figure").count();
    assert_eq!(figures, 4, "latency, hw-clock, session medians, null offsets");
    assert_eq!(html.matches("<svg").count(), figures, "one inline svg per figure");
    assert_eq!(html.matches("</svg>").count(), figures);
    assert!(html.contains("<td class=\"label\">five_tuple (sessions 1, 3)</td><td class=\"num\">92.0</td>"));
    assert!(html.contains("c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00"));
    assert!(html.contains("EPYC 7302P"));
    // Escaped text, not markup, from the summary.
    assert!(html.contains("U280 P4 latency (smoke test)"));
}

#[test]
fn hw_figure_and_columns_only_with_hw_data() {
    let dir = tmp_dir("no-hw");
    let mut s = summary();
    for p in s.programs.values_mut() {
        p.hw_check = None;
    }
    render(&s, &both(), None, &dir).unwrap();
    let html = read(&dir.join("report.html"));
    assert_eq!(html.matches("<svg").count(), 3);
    assert!(!html.contains("fig-hw-clock-check"));
    let md = read(&dir.join("report.md"));
    assert!(md.contains("| 436.0 | 109 | 18.0 | 13.8 | 2 | — | — |"));
    assert!(!dir.join("figures/hw-clock-check.svg").exists());
}

#[test]
fn missing_provenance_and_empty_sections_render() {
    let dir = tmp_dir("sparse");
    let mut s = summary();
    s.provenance = None;
    s.title = String::new();
    s.nulls.clear();
    s.programs.values_mut().for_each(|p| {
        p.vendor_bound = None;
        p.histogram = Histogram::default();
        p.latency_ns.remove(99.0);
    });
    render(&s, &both(), None, &dir).unwrap();
    let md = read(&dir.join("report.md"));
    assert!(md.starts_with("# Latency study u280-smoke\n"), "{md}");
    assert!(md.contains("| Plan hash | — |"));
    assert!(
        md.contains("| checksum | 349.0 | 358.0 | 364.0 | 370.0 | 377.0 | — | [363.8, 364.3] | — | — | — | — | — |")
    );
    let html = read(&dir.join("report.html"));
    assert!(!html.contains("fig-null-offsets") && !html.contains("fig-latency-distribution"));
}

#[test]
fn template_override_is_used() {
    let dir = tmp_dir("override-out");
    let templates = tmp_dir("override-templates");
    std::fs::write(
        templates.join("report.md.j2"),
        "custom {{ study }}: {% for r in table %}{{ r.label }}={{ r.quantiles[2] }};{% endfor %} end\n",
    )
    .unwrap();
    render(&summary(), &both(), Some(&templates), &dir).unwrap();
    assert_eq!(
        read(&dir.join("report.md")),
        "custom u280-smoke: checksum=364.0;five_tuple (sessions 1, 3)=107.0;five_tuple (sessions 2)=137.0; end\n"
    );
    // No HTML override in the folder: the built-in one is used.
    assert!(read(&dir.join("report.html")).contains("Table I."));

    // A broken override names its file.
    std::fs::write(templates.join("report.html.j2"), "{{ nope }}").unwrap();
    let err = render(&summary(), &both(), Some(&templates), &dir).unwrap_err();
    assert!(matches!(err, ReportError::Template { .. }), "{err}");
    assert!(err.to_string().contains("report.html.j2"), "{err}");

    let missing = templates.join("missing");
    let err = render(&summary(), &both(), Some(&missing), &dir).unwrap_err();
    assert!(err.to_string().contains("missing"), "{err}");
}

#[test]
fn html_override_is_autoescaped() {
    let dir = tmp_dir("escape-out");
    let templates = tmp_dir("escape-templates");
    std::fs::write(templates.join("report.html.j2"), "<p>{{ title }}</p>").unwrap();
    let mut s = summary();
    s.title = "<b>&</b>".into();
    render(&s, &[ReportFormat::Html], Some(&templates), &dir).unwrap();
    assert_eq!(read(&dir.join("report.html")), "<p>&lt;b&gt;&amp;&lt;&#x2f;b&gt;</p>");
}

/// Headless Chromium with a throw-away profile on `page` and `args`: its exit status and stderr,
/// or none when Chromium is not installed (the test is skipped with a notice, or fails when `CI` is set).
fn chromium(dir: &Path, page: &Path, args: &[String]) -> Option<(std::process::ExitStatus, String)> {
    let chromium = Path::new("/usr/bin/chromium");
    if !crate::common::runs_here(chromium.exists(), "/usr/bin/chromium (apt-get install chromium)") {
        return None;
    }
    let profile = dir.join("profile");
    std::fs::create_dir_all(&profile).unwrap();
    let mut child = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            &format!("--user-data-dir={}", profile.display()),
            "--enable-logging=stderr",
            "--v=0",
        ])
        .args(args)
        .arg(format!("file://{}", page.canonicalize().unwrap().display()))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read stderr on the side so that a chatty browser never blocks on a full pipe.
    let mut pipe = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = pipe.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within 120 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let stderr = reader.join().unwrap();
    let _ = std::fs::remove_dir_all(&profile);
    assert!(status.success(), "chromium failed ({status}):\n{stderr}");
    Some((status, stderr))
}

/// Render the HTML in headless Chromium: it must load without console errors and paint a
/// screenshot. Needs the `chromium` package; skipped without it unless `CI` is set.
#[test]
fn chromium_renders_html_without_console_errors() {
    let dir = tmp_dir("chromium");
    render(&summary(), &both(), None, &dir).unwrap();
    let shot = dir.join("shot.png");
    let args = [format!("--screenshot={}", shot.display()), "--window-size=1280,2400".to_string()];
    let Some((_, stderr)) = chromium(&dir, &dir.join("report.html"), &args) else { return };
    let png = std::fs::read(&shot).unwrap();
    assert!(png.starts_with(b"\x89PNG"), "screenshot is not a PNG");
    // A blank page of this size compresses to about 14 kB; the report (text, tables, figures)
    // to several hundred.
    assert!(png.len() > 50_000, "screenshot looks blank ({} bytes)", png.len());
    assert!(!stderr.contains("Uncaught"), "uncaught exception:\n{stderr}");
    // Chromium logs every console message as `INFO:CONSOLE:<line>]` whatever its level (console.error
    // included), so for a page that runs no script any console line is a problem.
    let console: Vec<&str> = stderr.lines().filter(|l| l.contains("CONSOLE")).collect();
    assert!(console.is_empty(), "console messages:\n{}", console.join("\n"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Print the HTML to PDF with headless Chromium (A4 by default): a handful of pages, the facts
/// table printed although collapsed on screen.
#[test]
fn the_html_report_prints_to_a_few_pages() {
    let dir = tmp_dir("print");
    render(&summary(), &both(), None, &dir).unwrap();
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("<details class=\"facts\">") && html.contains("class=\"print-only\""));
    let pdf = dir.join("report.pdf");
    let args = [format!("--print-to-pdf={}", pdf.display()), "--no-pdf-header-footer".to_string()];
    if chromium(&dir, &dir.join("report.html"), &args).is_none() {
        return;
    }
    let bytes = std::fs::read(&pdf).unwrap();
    assert!(bytes.starts_with(b"%PDF"), "not a PDF");
    let text = String::from_utf8_lossy(&bytes);
    let pages = text.matches("/Type /Page").count() - text.matches("/Type /Pages").count();
    assert!((2..=12).contains(&pages), "{pages} pages");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `orchestrate verify` passes on a fresh study and fails, naming the file or figure, after each
/// of: a byte of a run file changed, a figure of `summary.json` edited, a report rendered from an
/// edited summary (the summary then put back), a run file removed; it writes nothing.
#[test]
fn verify_finds_every_edit_of_a_results_folder() {
    use crate::common::{orchestrate, stderr, tmp};
    let fresh = || {
        let dir = tmp("verify");
        let o = orchestrate(&["run", "tests/fixtures/good/nightly.yaml", "--out", dir.to_str().unwrap(), "--quiet"]);
        assert!(o.status.success(), "{}", stderr(&o));
        dir
    };
    let verify = |dir: &std::path::Path| {
        let o = orchestrate(&["verify", dir.to_str().unwrap()]);
        (o.status.code(), stderr(&o))
    };
    let listing = |dir: &std::path::Path| {
        let mut files: Vec<(String, Vec<u8>)> = walk(dir)
            .into_iter()
            .map(|p| (p.strip_prefix(dir).unwrap().display().to_string(), std::fs::read(&p).unwrap()))
            .collect();
        files.sort();
        files
    };
    let dir = fresh();
    let before = listing(&dir);
    let (code, err) = verify(&dir);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(listing(&dir), before, "verify writes nothing");
    let run = walk(&dir.join("data")).into_iter().find(|p| p.extension().is_some_and(|e| e == "parquet")).unwrap();
    let rel = run.strip_prefix(&dir).unwrap().display().to_string();

    // One byte of a run file.
    let mut bytes = std::fs::read(&run).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x01;
    std::fs::write(&run, bytes).unwrap();
    let (code, err) = verify(&dir);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains(&format!("differs: {rel}: sha256 ")), "{err}");

    // A figure of summary.json.
    let dir = fresh();
    let path = dir.join("summary.json");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let m = v["programs"]["forward"]["median_ci95_ns"][0].as_f64().unwrap();
    v["programs"]["forward"]["median_ci95_ns"][0] = (m - 1.0).into();
    let edited = serde_json::to_string_pretty(&v).unwrap();
    std::fs::write(&path, &edited).unwrap();
    let (code, err) = verify(&dir);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("differs: summary.json.programs.forward.median_ci95_ns[0]: "), "{err}");

    // Reports rendered from the edited summary, the summary put back.
    let o = orchestrate(&["report", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    std::fs::write(&path, &text).unwrap();
    let (code, err) = verify(&dir);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("differs: report.md: not the report of summary.json"), "{err}");
    assert!(!err.contains("differs: summary.json"), "{err}");

    // A run file removed.
    let dir = fresh();
    std::fs::remove_file(dir.join(&rel)).unwrap();
    let (code, err) = verify(&dir);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains(&format!("differs: {rel}: missing")), "{err}");

    // A run's reduction forged whole (its checksum made again) and the summary analysed from it:
    // verify analyses the run files, never the reductions.
    let dir = fresh();
    let reduction = dir.join(latency_results::ResultsDir::reduction_rel_path(std::path::Path::new(&rel)));
    let mut forged = latency_results::reduction::Reduction::decode(&std::fs::read(&reduction).unwrap()).unwrap();
    forged.diffs.iter_mut().for_each(|d| d.1 += 2890);
    std::fs::write(&reduction, forged.encode()).unwrap();
    let o = orchestrate(&["analyze", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let (code, err) = verify(&dir);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("differs: summary.json.programs."), "{err}");
    // Without reductions, verify still writes nothing (it makes none again).
    let dir = fresh();
    std::fs::remove_dir_all(dir.join("pairs")).unwrap();
    let before = listing(&dir);
    let (code, err) = verify(&dir);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(listing(&dir), before, "verify writes no reduction");
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() { out.extend(walk(&p)) } else { out.push(p) }
    }
    out
}
