//! The report's figures as static SVG: latency distributions (the paper's Fig. 4), the
//! hardware-clock check (Fig. 5), session medians by reset mode (Fig. 6) and the null offsets.

use super::format::{mode_median, ns, ordered_modes, session_list, session_modes};
use super::svg::{Anchor, Axis, Decor, Figure, Frame, Svg, TEXT, TEXT_MUTED, colour, text_width};
use latency_results::summary::Histogram;
use latency_results::summary::ProgramSummary;
use latency_results::summary::Summary;
use latency_results::summary::level_key;

/// Canvas width of every figure (px); the HTML scales it down to the page.
const WIDTH: f64 = 960.0;
const BOUND_COLOUR: &str = "#C0392B";

/// All figures the summary has data for, in report order.
pub(crate) fn all(s: &Summary) -> Vec<Figure> {
    let mut out: Vec<Figure> =
        [latency_distribution(s), hw_check(s), session_medians(s), null_offsets(s)].into_iter().flatten().collect();
    out.extend(super::levels::figures(s));
    out
}

/// Columns of a grid of `n` panels.
fn columns(n: usize) -> usize {
    n.clamp(1, 2)
}

/// Left margin and inner width of panel `col` of `cols`.
fn panel_x(col: usize, cols: usize, left: f64, right: f64, gap: f64) -> (f64, f64) {
    let w = (WIDTH - left - right - gap * (cols - 1) as f64) / cols as f64;
    (left + col as f64 * (w + gap), w)
}

/// Data extent of a histogram: first and last non-empty bin edges.
fn histogram_extent(p: &ProgramSummary) -> Option<(f64, f64)> {
    let h = &p.histogram;
    if !(h.bin_ns > 0.0 && h.start_ns.is_finite()) {
        return None;
    }
    let first = h.counts.iter().position(|&c| c > 0)?;
    let last = h.counts.iter().rposition(|&c| c > 0)?;
    Some((h.start_ns + first as f64 * h.bin_ns, h.start_ns + (last + 1) as f64 * h.bin_ns))
}

fn latency_distribution(s: &Summary) -> Option<Figure> {
    if s.programs.is_empty() {
        return None;
    }
    // Shared x-range: every histogram and median; vendor bounds when they do not squash the data.
    if s.programs.values().all(|p| histogram_extent(p).is_none()) {
        return None;
    }
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for p in s.programs.values() {
        if let Some((a, b)) = histogram_extent(p) {
            lo = lo.min(a);
            hi = hi.max(b);
        }
        for m in &p.modes {
            let v = mode_median(m);
            if v.is_finite() {
                lo = lo.min(v);
                hi = hi.max(v);
            }
        }
    }
    if !(lo.is_finite() && hi.is_finite()) {
        return None;
    }
    let data_span = (hi - lo).max(10.0);
    for p in s.programs.values() {
        if let Some(b) = &p.vendor_bound
            && b.ns.is_finite()
            && b.ns <= hi + 0.6 * data_span
            && b.ns >= lo - 0.6 * data_span
        {
            lo = lo.min(b.ns);
            hi = hi.max(b.ns);
        }
    }
    let pad = (hi - lo) * 0.03;
    let x = Axis::nice(lo - pad, hi + pad, 10);

    let (left, right, top, panel_h, title_h, gap, bottom) = (78.0, 24.0, 8.0, 140.0, 24.0, 14.0, 58.0);
    let n = s.programs.len() as f64;
    let height = top + n * (title_h + panel_h) + (n - 1.0) * gap + bottom;
    let mut svg = Svg::new(WIDTH, height);
    let mut y0 = top;
    let mut bins = Vec::new();
    for (i, (name, p)) in s.programs.iter().enumerate() {
        let last = i + 1 == s.programs.len();
        let h = &p.histogram;
        let total: u64 = h.counts.iter().sum();
        if h.bin_ns > 0.0 && !bins.contains(&ns(h.bin_ns)) {
            bins.push(ns(h.bin_ns));
        }
        let peak = h.counts.iter().copied().max().unwrap_or(0);
        let peak_share = if total > 0 { peak as f64 / total as f64 * 100.0 } else { 1.0 };
        // Room above the peak for one label row per median and one for the bound.
        let modes = ordered_modes(p);
        let medians: Vec<(usize, f64)> =
            modes.iter().map(|m| mode_median(m)).enumerate().filter(|(_, v)| v.is_finite()).collect();
        let label_rows = medians.len() + usize::from(p.vendor_bound.is_some());
        let headroom = panel_h / (panel_h - (16.0 * label_rows as f64 + 10.0)).max(panel_h / 3.0);
        let mut y = Axis::nice(0.0, peak_share * headroom.max(1.15), 3);
        y.ticks.retain(|t| *t <= y.hi);
        let frame = Frame { left, top: y0 + title_h, width: WIDTH - left - right, height: panel_h, x: x.clone(), y };
        let detail = format!("{} probes, trace {}, bitstream {}", p.probes, p.trace, p.bitstream);
        svg.title(left, y0 + 16.0, name, &detail);
        frame.draw(
            &mut svg,
            &Decor { x_title: last.then_some("calibrated latency L̂ (ns)"), x_labels: last, ..Decor::default() },
        );
        let c = colour(i);
        if total > 0 && h.bin_ns > 0.0 {
            if let Some(d) = histogram_path(&frame, h) {
                svg.path(&d, c, 0.35, c, 1.2);
            }
        } else {
            svg.text(
                frame.left + frame.width / 2.0,
                frame.top + panel_h / 2.0,
                "no data",
                13.0,
                Anchor::Middle,
                TEXT_MUTED,
                false,
            );
        }
        let bound_label = p.vendor_bound.as_ref().map(|b| {
            let label = format!("vendor bound {} ns ({} cycles)", ns(b.ns), b.cycles);
            if b.ns >= x.lo && b.ns <= x.hi {
                let bx = frame.px(b.ns);
                svg.line(bx, frame.top, bx, frame.top + panel_h, BOUND_COLOUR, 1.6, Some("6 4"));
                let (tx, anchor) = flip(bx, &label, &frame);
                (tx, anchor, label)
            } else {
                (frame.left + frame.width - 6.0, Anchor::End, format!("{label}, off scale"))
            }
        });
        // Lines first, then labels, so that no line crosses another mode's label.
        for &(_, v) in &medians {
            let mx = frame.px(v);
            svg.line(mx, frame.top, mx, frame.top + panel_h, TEXT, 1.8, None);
        }
        for &(k, v) in &medians {
            let label = if modes.len() > 1 {
                format!("median {} ns (sessions {})", ns(v), session_list(&modes[k].sessions))
            } else {
                format!("median {} ns", ns(v))
            };
            let (tx, anchor) = flip(frame.px(v), &label, &frame);
            svg.label(tx, frame.top + 16.0 + 16.0 * k as f64, &label, 12.0, anchor, TEXT, false);
        }
        if let Some((tx, anchor, label)) = bound_label {
            let row = medians.len() as f64;
            svg.label(tx, frame.top + 16.0 + 16.0 * row, &label, 12.0, anchor, BOUND_COLOUR, false);
        }
        y0 += title_h + panel_h + gap;
    }
    let mid = top + (height - top - bottom) / 2.0;
    let bin = if bins.len() == 1 { format!("{} ns bin", bins[0]) } else { "bin".to_string() };
    svg.vtext(22.0, mid, &format!("share of probes per {bin} (%)"), 14.0);
    let title = "Latency distribution per program";
    Some(Figure {
        id: "latency-distribution",
        title: title.to_string(),
        caption: format!(
            "Histogram of the calibrated per-probe latency L̂ of each program over all sessions \
             (share of probes per {bin}). Solid lines mark the median{}; red dashed lines the vendor's \
             worst-case bound.",
            if s.programs.values().any(|p| p.modes.len() > 1) { " of each reset mode" } else { "" }
        ),
        svg: svg.finish(title),
    })
}

/// The outline of `h`, each bin's share of its probes, as an SVG path over `frame`, the bins
/// beyond its x axis cut off; none when no bin is on the axis.
pub(super) fn histogram_path(frame: &Frame, h: &Histogram) -> Option<String> {
    let total: u64 = h.counts.iter().sum();
    if total == 0 || h.bin_ns.is_nan() || h.bin_ns <= 0.0 {
        return None;
    }
    let base = frame.py(0.0);
    let mut d = String::new();
    let mut end = None;
    for (k, &count) in h.counts.iter().enumerate() {
        let a = (h.start_ns + k as f64 * h.bin_ns).max(frame.x.lo);
        let b = (h.start_ns + (k + 1) as f64 * h.bin_ns).min(frame.x.hi);
        if b <= a {
            continue;
        }
        if d.is_empty() {
            d.push_str(&format!("M{:.1},{base:.1}", frame.px(a)));
        }
        let yv = frame.py(count as f64 / total as f64 * 100.0);
        d.push_str(&format!("L{:.1},{yv:.1}L{:.1},{yv:.1}", frame.px(a), frame.px(b)));
        end = Some(b);
    }
    d.push_str(&format!("L{:.1},{base:.1}Z", frame.px(end?)));
    Some(d)
}

/// Where to put a label next to a vertical line at `x`: right of it, or left when it would run
/// out of the frame.
fn flip(x: f64, label: &str, frame: &Frame) -> (f64, Anchor) {
    if x + 6.0 + text_width(label, 12.0) > frame.left + frame.width - 4.0 {
        (x - 6.0, Anchor::End)
    } else {
        (x + 6.0, Anchor::Start)
    }
}

fn hw_check(s: &Summary) -> Option<Figure> {
    let progs: Vec<_> = s.programs.iter().filter_map(|(n, p)| p.hw_check.as_ref().map(|h| (n, h))).collect();
    if progs.is_empty() {
        return None;
    }
    let cols = columns(progs.len());
    let rows = progs.len().div_ceil(cols);
    let (left, right, gap_x, top, legend_h, title_h, panel_h, gap_y, bottom) =
        (70.0, 20.0, 80.0, 8.0, 26.0, 24.0, 230.0, 62.0, 0.0);
    let height = top + legend_h + rows as f64 * (title_h + panel_h + gap_y) + bottom;
    let mut svg = Svg::new(WIDTH, height);
    let (measured_c, synth_c) = (colour(0), colour(1));
    let mut lx = left;
    lx += svg.legend_entry(lx, top + 16.0, "measured R (adapter clock)", |s, x, y| {
        s.line(x - 8.0, y, x + 8.0, y, measured_c, 2.0, None);
        s.circle(x, y, 4.5, measured_c, measured_c);
    });
    svg.legend_entry(lx, top + 16.0, "synthesised D ⊕ C (random re-pairing)", |s, x, y| {
        s.line(x - 8.0, y, x + 8.0, y, synth_c, 2.0, Some("5 3"));
        s.diamond(x, y, 5.0, "#fff", synth_c);
    });
    for (i, (name, h)) in progs.iter().enumerate() {
        let (col, row) = (i % cols, i / cols);
        let (px, pw) = panel_x(col, cols, left, right, gap_x);
        let py = top + legend_h + row as f64 * (title_h + panel_h + gap_y);
        let verdict = if h.pass { "pass" } else { "FAIL" };
        svg.title(
            px,
            py + 16.0,
            name,
            &format!("max |Δ| {} ns, tolerance {} ns: {verdict}", ns(h.max_diff_ns), ns(h.tolerance_ns)),
        );
        let values = h.levels.iter().flat_map(|l| [l.measured_ns, l.synthesized_ns]).filter(|v| v.is_finite());
        let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| (a.min(v), b.max(v)));
        let pad = ((hi - lo) * 0.08).max(1.0);
        let n = h.levels.len().max(1);
        let frame = Frame {
            left: px,
            top: py + title_h,
            width: pw,
            height: panel_h,
            x: Axis::categories(n),
            y: Axis::nice(lo - pad, hi + pad, 5),
        };
        let cats = h.levels.iter().enumerate().map(|(k, l)| (k as f64, level_key(l.level))).collect();
        frame.draw(
            &mut svg,
            &Decor {
                x_title: Some("quantile level"),
                y_title: Some("R quantile (ns)"),
                x_labels: true,
                x_categories: Some(cats),
                ..Decor::default()
            },
        );
        let pts = |f: fn(&latency_results::summary::HwLevel) -> f64| -> Vec<(f64, f64)> {
            h.levels
                .iter()
                .enumerate()
                .filter(|(_, l)| f(l).is_finite())
                .map(|(k, l)| (frame.px(k as f64), frame.py(f(l))))
                .collect()
        };
        let measured = pts(|l| l.measured_ns);
        let synth = pts(|l| l.synthesized_ns);
        svg.polyline(&measured, measured_c, 2.0, None);
        svg.polyline(&synth, synth_c, 2.0, Some("5 3"));
        for &(x, y) in &measured {
            svg.circle(x, y, 4.5, measured_c, measured_c);
        }
        for &(x, y) in &synth {
            svg.diamond(x, y, 5.5, "#fff", synth_c);
        }
    }
    let title = "Hardware-clock check";
    Some(Figure {
        id: "hw-clock-check",
        title: title.to_string(),
        caption: "Quantiles of the reflected pairs' adapter-clock differentials R = D + C (measured) against \
                  the convolution of the TSC differentials D with the residuals C synthesised by random \
                  re-pairing. Agreement within the tolerance confirms the TSC-based estimate."
            .to_string(),
        svg: svg.finish(title),
    })
}

fn session_medians(s: &Summary) -> Option<Figure> {
    let progs: Vec<_> = s.programs.iter().filter(|(_, p)| !p.sessions.is_empty()).collect();
    if progs.is_empty() {
        return None;
    }
    let cols = columns(progs.len());
    let rows = progs.len().div_ceil(cols);
    let (left, right, gap_x, top, title_h, legend_h, panel_h, gap_y) = (70.0, 20.0, 80.0, 8.0, 24.0, 20.0, 200.0, 62.0);
    let height = top + rows as f64 * (title_h + legend_h + panel_h + gap_y);
    let mut svg = Svg::new(WIDTH, height);
    for (i, (name, p)) in progs.iter().enumerate() {
        let (col, row) = (i % cols, i / cols);
        let (px, pw) = panel_x(col, cols, left, right, gap_x);
        let py = top + row as f64 * (title_h + legend_h + panel_h + gap_y);
        svg.title(px, py + 16.0, name, &format!("within-mode spread {} ns", ns(p.reproducibility_ns)));
        let modes = ordered_modes(p);
        let of_session = session_modes(&modes);
        let mut lx = px;
        for (k, m) in modes.iter().enumerate() {
            let c = colour(k);
            let text = if modes.len() == 1 {
                format!("single mode: sessions {}", session_list(&m.sessions))
            } else {
                format!("mode {}: sessions {}", k + 1, session_list(&m.sessions))
            };
            lx += svg.legend_entry(lx, py + title_h + 14.0, &text, |s, x, y| s.circle(x, y, 5.0, c, c));
        }
        let meds = p.sessions.iter().map(|x| x.median_ns).chain(modes.iter().map(|m| mode_median(m)));
        let (lo, hi) =
            meds.filter(|v| v.is_finite()).fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| (a.min(v), b.max(v)));
        let (lo, hi) = if hi - lo < 4.0 { ((lo + hi) / 2.0 - 2.0, (lo + hi) / 2.0 + 2.0) } else { (lo, hi) };
        let pad = (hi - lo) * 0.1;
        let first = p.sessions.iter().map(|x| x.session).min().unwrap_or(1);
        let last = p.sessions.iter().map(|x| x.session).max().unwrap_or(1);
        let frame = Frame {
            left: px,
            top: py + title_h + legend_h,
            width: pw,
            height: panel_h,
            x: Axis::integers(first, last, 12),
            y: Axis::nice(lo - pad, hi + pad, 4),
        };
        frame.draw(
            &mut svg,
            &Decor {
                x_title: Some("session"),
                y_title: Some("calibrated median (ns)"),
                x_labels: true,
                ..Decor::default()
            },
        );
        for (k, m) in modes.iter().enumerate() {
            let v = mode_median(m);
            if v.is_finite() {
                let y = frame.py(v);
                svg.line(frame.left, y, frame.left + frame.width, y, colour(k), 1.2, Some("5 4"));
            }
        }
        for sess in &p.sessions {
            if !sess.median_ns.is_finite() {
                continue;
            }
            let c = of_session.get(&sess.session).map_or("#777", |&k| colour(k));
            svg.circle(frame.px(f64::from(sess.session)), frame.py(sess.median_ns), 5.5, c, "#fff");
        }
    }
    let title = "Session medians by reset mode";
    Some(Figure {
        id: "session-medians",
        title: title.to_string(),
        caption: "Calibrated median latency of each session (one full bring-up each), coloured by the reset \
                  mode the session fell into; dashed lines are the pooled medians of the modes."
            .to_string(),
        svg: svg.finish(title),
    })
}

fn null_offsets(s: &Summary) -> Option<Figure> {
    let nulls: Vec<_> = s.nulls.iter().filter(|(_, n)| !n.sessions.is_empty() || n.offset_ns.is_finite()).collect();
    if nulls.is_empty() {
        return None;
    }
    let (left, right, top, legend_h, panel_h, bottom) = (70.0, 20.0, 8.0, 26.0, 220.0, 58.0);
    let height = top + legend_h + panel_h + bottom;
    let mut svg = Svg::new(WIDTH, height);
    let values = nulls.iter().flat_map(|(_, n)| n.sessions.iter().map(|x| x.1).chain([n.offset_ns]));
    let (lo, hi) =
        values.filter(|v| v.is_finite()).fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| (a.min(v), b.max(v)));
    let pad = ((hi - lo) * 0.1).max(1.0);
    let sessions = nulls.iter().flat_map(|(_, n)| n.sessions.iter().map(|x| x.0));
    let (first, last) = sessions.fold((u32::MAX, 0), |(a, b), v| (a.min(v), b.max(v)));
    let (first, last) = if first > last { (1, 1) } else { (first, last) };
    let frame = Frame {
        left,
        top: top + legend_h,
        width: WIDTH - left - right,
        height: panel_h,
        x: Axis::integers(first, last, 20),
        y: Axis::nice(lo - pad, hi + pad, 5),
    };
    frame.draw(
        &mut svg,
        &Decor {
            x_title: Some("null session"),
            y_title: Some("null offset δ̂ (ns)"),
            x_labels: true,
            ..Decor::default()
        },
    );
    let mut lx = left;
    let spread = nulls.len() as f64;
    for (i, (trace, n)) in nulls.iter().enumerate() {
        let c = colour(i);
        let text = format!("trace {trace}: pooled {} ns", ns(n.offset_ns));
        lx += svg.legend_entry(lx, top + 16.0, &text, |s, x, y| {
            s.line(x - 8.0, y, x + 8.0, y, c, 1.5, Some("5 4"));
            s.circle(x, y, 4.5, c, "#fff");
        });
        if n.offset_ns.is_finite() {
            let y = frame.py(n.offset_ns);
            svg.line(frame.left, y, frame.left + frame.width, y, c, 1.5, Some("5 4"));
        }
        // Traces sharing a session number are nudged apart so that no point hides another.
        let nudge = (i as f64 - (spread - 1.0) / 2.0) * 0.1;
        for &(sess, v) in &n.sessions {
            if v.is_finite() {
                svg.circle(frame.px(f64::from(sess) + nudge), frame.py(v), 5.5, c, "#fff");
            }
        }
    }
    let title = "Null offsets per trace and session";
    Some(Figure {
        id: "null-offsets",
        title: title.to_string(),
        caption: "Port asymmetry δ̂ measured with the null bitstream (bypass on both ports) in each null session, \
                  per trace; dashed lines are the pooled offsets subtracted from the programs on that trace."
            .to_string(),
        svg: svg.finish(title),
    })
}
