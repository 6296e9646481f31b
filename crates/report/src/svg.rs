//! A small SVG writer for the report's static figures: shapes, text, and framed panels with
//! "nice" axis ticks. Hand-written rather than drawn with a plotting crate so that the output is
//! compact, deterministic (snapshot-friendly) and needs no font files: text is left to the viewer's
//! sans-serif font, and label widths are estimated from the character count.

// Drawing primitives take coordinates plus style, as the SVG elements they write do.
#![allow(clippy::too_many_arguments)]

use std::fmt::Write as _;

/// Colour-blind-safe categorical palette (Okabe–Ito, without the low-contrast yellow).
pub(super) const PALETTE: [&str; 7] = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000"];

/// Colour of the `i`-th series.
pub(super) fn colour(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

const FONT: &str = "'DejaVu Sans', 'Liberation Sans', Arial, Helvetica, sans-serif";
const INK: &str = "#222";
const MUTED: &str = "#555";
const GRID: &str = "#e3e3e3";

/// Horizontal anchoring of a text.
#[derive(Clone, Copy)]
pub(super) enum Anchor {
    Start,
    Middle,
    End,
}

impl Anchor {
    fn as_str(self) -> &'static str {
        match self {
            Anchor::Start => "start",
            Anchor::Middle => "middle",
            Anchor::End => "end",
        }
    }
}

/// Estimated width of `s` at `size` px: an average glyph of the fonts above is about 0.6 em; a
/// little more is assumed so that neighbours never collide.
pub(super) fn text_width(s: &str, size: f64) -> f64 {
    s.chars().count() as f64 * size * 0.62
}

/// Escape text for XML content and attribute values.
pub(super) fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// An SVG document under construction.
pub(super) struct Svg {
    width: f64,
    height: f64,
    body: String,
}

impl Svg {
    /// A blank white canvas.
    pub(super) fn new(width: f64, height: f64) -> Svg {
        let mut s = Svg { width, height, body: String::new() };
        s.rect(0.0, 0.0, width, height, "#fff", None, 1.0);
        s
    }

    /// A straight line; `dash` is an SVG dash array.
    pub(super) fn line(&mut self, x1: f64, y1: f64, x2: f64, y2: f64, stroke: &str, width: f64, dash: Option<&str>) {
        let dash = dash.map(|d| format!(" stroke-dasharray=\"{d}\"")).unwrap_or_default();
        let _ = writeln!(
            self.body,
            "<line x1=\"{x1:.1}\" y1=\"{y1:.1}\" x2=\"{x2:.1}\" y2=\"{y2:.1}\" stroke=\"{stroke}\" stroke-width=\"{width}\"{dash}/>"
        );
    }

    /// A rectangle.
    pub(super) fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, fill: &str, stroke: Option<&str>, opacity: f64) {
        let stroke = stroke.map(|s| format!(" stroke=\"{s}\"")).unwrap_or_default();
        let opacity = if opacity < 1.0 { format!(" fill-opacity=\"{opacity}\"") } else { String::new() };
        let _ = writeln!(
            self.body,
            "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{h:.1}\" fill=\"{fill}\"{opacity}{stroke}/>"
        );
    }

    /// A circle marker (`fill` "none" for a hollow one).
    pub(super) fn circle(&mut self, cx: f64, cy: f64, r: f64, fill: &str, stroke: &str) {
        let _ = writeln!(
            self.body,
            "<circle cx=\"{cx:.1}\" cy=\"{cy:.1}\" r=\"{r}\" fill=\"{fill}\" stroke=\"{stroke}\" stroke-width=\"1.5\"/>"
        );
    }

    /// A filled circle with a tooltip, a link when `href` is given.
    pub(super) fn linked_circle(&mut self, cx: f64, cy: f64, r: f64, fill: &str, tip: &str, href: Option<&str>) {
        let circle = format!(
            "<circle cx=\"{cx:.1}\" cy=\"{cy:.1}\" r=\"{r}\" fill=\"{fill}\"><title>{}</title></circle>",
            escape(tip)
        );
        let _ = match href {
            Some(h) => writeln!(self.body, "<a href=\"{}\">{circle}</a>", escape(h)),
            None => writeln!(self.body, "{circle}"),
        };
    }

    /// A diamond marker.
    pub(super) fn diamond(&mut self, cx: f64, cy: f64, r: f64, fill: &str, stroke: &str) {
        let d = format!("M{cx:.1},{:.1}L{:.1},{cy:.1}L{cx:.1},{:.1}L{:.1},{cy:.1}Z", cy - r, cx + r, cy + r, cx - r);
        self.path(&d, fill, 1.0, stroke, 1.5);
    }

    /// A path.
    pub(super) fn path(&mut self, d: &str, fill: &str, fill_opacity: f64, stroke: &str, stroke_width: f64) {
        let opacity = if fill_opacity < 1.0 { format!(" fill-opacity=\"{fill_opacity}\"") } else { String::new() };
        let _ = writeln!(
            self.body,
            "<path d=\"{d}\" fill=\"{fill}\"{opacity} stroke=\"{stroke}\" stroke-width=\"{stroke_width}\" stroke-linejoin=\"round\"/>"
        );
    }

    /// A polyline through `points`.
    pub(super) fn polyline(&mut self, points: &[(f64, f64)], stroke: &str, width: f64, dash: Option<&str>) {
        if points.len() < 2 {
            return;
        }
        let pts: Vec<String> = points.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
        let dash = dash.map(|d| format!(" stroke-dasharray=\"{d}\"")).unwrap_or_default();
        let _ = writeln!(
            self.body,
            "<polyline points=\"{}\" fill=\"none\" stroke=\"{stroke}\" stroke-width=\"{width}\"{dash}/>",
            pts.join(" ")
        );
    }

    /// Text at (x, y) (baseline); `bold` for titles.
    pub(super) fn text(&mut self, x: f64, y: f64, s: &str, size: f64, anchor: Anchor, fill: &str, bold: bool) {
        let weight = if bold { " font-weight=\"bold\"" } else { "" };
        let _ = writeln!(
            self.body,
            "<text x=\"{x:.1}\" y=\"{y:.1}\" font-size=\"{size}\" text-anchor=\"{}\" fill=\"{fill}\"{weight}>{}</text>",
            anchor.as_str(),
            escape(s)
        );
    }

    /// Text rotated by −90° around (x, y) (for y-axis labels).
    pub(super) fn vtext(&mut self, x: f64, y: f64, s: &str, size: f64) {
        let _ = writeln!(
            self.body,
            "<text x=\"{x:.1}\" y=\"{y:.1}\" font-size=\"{size}\" text-anchor=\"middle\" fill=\"{INK}\" transform=\"rotate(-90 {x:.1} {y:.1})\">{}</text>",
            escape(s)
        );
    }

    /// Text with a white halo so it stays legible over lines and bars.
    pub(super) fn label(&mut self, x: f64, y: f64, s: &str, size: f64, anchor: Anchor, fill: &str, bold: bool) {
        let weight = if bold { " font-weight=\"bold\"" } else { "" };
        let _ = writeln!(
            self.body,
            "<text x=\"{x:.1}\" y=\"{y:.1}\" font-size=\"{size}\" text-anchor=\"{}\" fill=\"{fill}\"{weight} stroke=\"#fff\" stroke-width=\"3\" paint-order=\"stroke\">{}</text>",
            anchor.as_str(),
            escape(s)
        );
    }

    /// A legend entry: a marker or swatch drawn by `mark` centred at (x + 10, y − 4.5), then the
    /// text. Returns the horizontal space used.
    pub(super) fn legend_entry(&mut self, x: f64, y: f64, text: &str, mark: impl FnOnce(&mut Svg, f64, f64)) -> f64 {
        mark(self, x + 10.0, y - 4.5);
        self.text(x + 24.0, y, text, 13.0, Anchor::Start, INK, false);
        24.0 + text_width(text, 13.0) + 20.0
    }

    /// A panel title: `name` in bold, then `detail` in grey (one text element, so the viewer
    /// places the detail after the name whatever the font).
    pub(super) fn title(&mut self, x: f64, y: f64, name: &str, detail: &str) {
        let _ = writeln!(
            self.body,
            "<text x=\"{x:.1}\" y=\"{y:.1}\" fill=\"{INK}\"><tspan font-size=\"14\" font-weight=\"bold\">{}</tspan><tspan dx=\"10\" font-size=\"13\" fill=\"{MUTED}\">{}</tspan></text>",
            escape(name),
            escape(detail)
        );
    }

    /// The finished document, without an XML namespace (for inline use in HTML). `title` is the
    /// accessible name.
    pub(super) fn finish(self, title: &str) -> String {
        let (w, h) = (self.width, self.height);
        format!(
            "<svg viewBox=\"0 0 {w:.0} {h:.0}\" width=\"{w:.0}\" height=\"{h:.0}\" role=\"img\" aria-label=\"{t}\" font-family=\"{FONT}\">\n<title>{t}</title>\n{}</svg>\n",
            self.body,
            t = escape(title),
        )
    }
}

/// An axis range with its tick positions.
#[derive(Clone, Debug)]
pub(super) struct Axis {
    pub(super) lo: f64,
    pub(super) hi: f64,
    pub(super) ticks: Vec<f64>,
    step: f64,
}

impl Axis {
    /// A range covering `[lo, hi]` that starts and ends on "nice" ticks (1, 2 or 5 × 10ⁿ), with about
    /// `target` intervals. Degenerate or non-finite input gets a unit range around it.
    pub(super) fn nice(lo: f64, hi: f64, target: usize) -> Axis {
        let (mut lo, mut hi) = if lo.is_finite() && hi.is_finite() { (lo.min(hi), lo.max(hi)) } else { (0.0, 1.0) };
        if hi - lo < 1e-9 {
            lo -= 1.0;
            hi += 1.0;
        }
        let step = nice_step(hi - lo, target.max(1));
        let lo_t = (lo / step).floor() * step;
        let hi_t = (hi / step).ceil() * step;
        let n = ((hi_t - lo_t) / step).round() as usize;
        let ticks = (0..=n).map(|k| clean(lo_t + k as f64 * step)).collect();
        Axis { lo: lo_t, hi: hi_t, ticks, step }
    }

    /// Integer positions `lo..=hi` (sessions), with half a unit of room on each side; ticks are
    /// thinned to at most `max_ticks`.
    pub(super) fn integers(lo: u32, hi: u32, max_ticks: usize) -> Axis {
        let (lo, hi) = (lo.min(hi), lo.max(hi));
        let span = (hi - lo) as usize + 1;
        let every = span.div_ceil(max_ticks.max(1)).max(1);
        let ticks = (lo..=hi).step_by(every).map(f64::from).collect();
        Axis { lo: f64::from(lo) - 0.5, hi: f64::from(hi) + 0.5, ticks, step: every as f64 }
    }

    /// Decades `lo..=hi` of a log axis (positions are exponents).
    pub(super) fn decades(lo: i32, hi: i32) -> Axis {
        let hi = hi.max(lo + 1);
        Axis { lo: f64::from(lo), hi: f64::from(hi), ticks: (lo..=hi).map(f64::from).collect(), step: 1.0 }
    }

    /// `n` categories at positions `0..n`, half a unit of room on each side (labels supplied by
    /// [`Decor::x_categories`]).
    pub(super) fn categories(n: usize) -> Axis {
        Axis { lo: -0.5, hi: n.max(1) as f64 - 0.5, ticks: (0..n).map(|k| k as f64).collect(), step: 1.0 }
    }

    /// The label of a tick, with as many decimals as the step needs.
    pub(super) fn tick_label(&self, v: f64) -> String {
        let decimals = if self.step >= 1.0 { 0 } else { (-self.step.log10()).ceil() as usize };
        format!("{:.*}", decimals, clean(v))
    }
}

/// Round-off from tick arithmetic (e.g. 0.30000000000000004) and negative zero removed.
fn clean(v: f64) -> f64 {
    let r = (v * 1e9).round() / 1e9;
    if r == 0.0 { 0.0 } else { r }
}

fn nice_step(range: f64, target: usize) -> f64 {
    let raw = range / target as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let norm = raw / mag;
    let nice = if norm <= 1.0 {
        1.0
    } else if norm <= 2.0 {
        2.0
    } else if norm <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * mag
}

/// A plotting area on the canvas with its axes.
#[derive(Clone, Debug)]
pub(super) struct Frame {
    pub(super) left: f64,
    pub(super) top: f64,
    pub(super) width: f64,
    pub(super) height: f64,
    pub(super) x: Axis,
    pub(super) y: Axis,
}

/// What to draw around a frame.
#[derive(Default)]
pub(super) struct Decor<'a> {
    /// x-axis title (below the tick labels).
    pub(super) x_title: Option<&'a str>,
    /// y-axis title (rotated, left of the tick labels).
    pub(super) y_title: Option<&'a str>,
    /// Whether to print the x tick labels (off for stacked panels sharing the x-axis).
    pub(super) x_labels: bool,
    /// Replace the x tick labels (categorical axes): (position, label).
    pub(super) x_categories: Option<Vec<(f64, String)>>,
    /// Replace the y tick labels (decades of a log axis): (position, label).
    pub(super) y_categories: Option<Vec<(f64, String)>>,
}

impl Frame {
    /// Canvas x of data value `v`.
    pub(super) fn px(&self, v: f64) -> f64 {
        self.left + (v - self.x.lo) / (self.x.hi - self.x.lo) * self.width
    }

    /// Canvas y of data value `v`.
    pub(super) fn py(&self, v: f64) -> f64 {
        self.top + self.height - (v - self.y.lo) / (self.y.hi - self.y.lo) * self.height
    }

    /// Grid, frame, ticks and axis titles.
    pub(super) fn draw(&self, svg: &mut Svg, decor: &Decor<'_>) {
        let bottom = self.top + self.height;
        let right = self.left + self.width;
        let y_ticks: Vec<(f64, String)> = match &decor.y_categories {
            Some(c) => c.clone(),
            None => self.y.ticks.iter().map(|&t| (t, self.y.tick_label(t))).collect(),
        };
        for (t, label) in &y_ticks {
            let y = self.py(*t);
            svg.line(self.left, y, right, y, GRID, 1.0, None);
            svg.line(self.left - 4.0, y, self.left, y, MUTED, 1.0, None);
            svg.text(self.left - 7.0, y + 4.5, label, 13.0, Anchor::End, INK, false);
        }
        let x_ticks: Vec<(f64, String)> = match &decor.x_categories {
            Some(c) => c.clone(),
            None => self.x.ticks.iter().map(|&t| (t, self.x.tick_label(t))).collect(),
        };
        for (t, label) in &x_ticks {
            let x = self.px(*t);
            svg.line(x, self.top, x, bottom, GRID, 1.0, None);
            svg.line(x, bottom, x, bottom + 4.0, MUTED, 1.0, None);
            if decor.x_labels {
                svg.text(x, bottom + 18.0, label, 13.0, Anchor::Middle, INK, false);
            }
        }
        let _ = writeln!(
            svg.body,
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"none\" stroke=\"#999\"/>",
            self.left, self.top, self.width, self.height
        );
        if let Some(t) = decor.x_title {
            svg.text(self.left + self.width / 2.0, bottom + 38.0, t, 14.0, Anchor::Middle, INK, false);
        }
        if let Some(t) = decor.y_title {
            let widest = y_ticks.iter().map(|(_, l)| text_width(l, 13.0)).fold(0.0, f64::max);
            svg.vtext(self.left - 16.0 - widest, self.top + self.height / 2.0, t, 14.0);
        }
    }
}

/// Default text colours, for the figure code.
pub(super) const TEXT: &str = INK;
/// Secondary text colour.
pub(super) const TEXT_MUTED: &str = MUTED;

/// One figure.
#[derive(Clone, Debug)]
pub(crate) struct Figure {
    /// Stable identifier, also the SVG file name (`figures/<id>.svg`).
    pub(crate) id: &'static str,
    /// Title.
    pub(crate) title: String,
    /// Caption (what is plotted and how to read it).
    pub(crate) caption: String,
    /// The SVG document without an XML namespace (for inline use).
    pub(crate) svg: String,
}

impl Figure {
    /// The SVG as a standalone file.
    pub(crate) fn standalone(&self) -> String {
        let with_ns = self.svg.replacen("<svg ", "<svg xmlns=\"http://www.w3.org/2000/svg\" ", 1);
        format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n{with_ns}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_axis_covers_range_with_round_ticks() {
        let a = Axis::nice(92.3, 168.7, 6);
        assert_eq!(a.lo, 80.0);
        assert_eq!(a.hi, 180.0);
        assert_eq!(a.ticks, vec![80.0, 100.0, 120.0, 140.0, 160.0, 180.0]);
        assert_eq!(a.tick_label(100.0), "100");
    }

    #[test]
    fn nice_axis_small_steps_get_decimals() {
        let a = Axis::nice(0.0, 0.9, 5);
        assert_eq!(a.ticks, vec![0.0, 0.2, 0.4, 0.6, 0.8, 1.0]);
        assert_eq!(a.tick_label(0.6), "0.6");
    }

    #[test]
    fn degenerate_and_non_finite_ranges_do_not_panic() {
        let a = Axis::nice(5.0, 5.0, 5);
        assert!(a.lo < 5.0 && a.hi > 5.0);
        let b = Axis::nice(f64::NAN, f64::INFINITY, 5);
        assert!(b.lo.is_finite() && b.hi.is_finite() && b.hi > b.lo);
    }

    #[test]
    fn integer_axis_thins_ticks() {
        let a = Axis::integers(1, 20, 5);
        assert_eq!(a.ticks, vec![1.0, 5.0, 9.0, 13.0, 17.0]);
        assert_eq!(a.lo, 0.5);
    }

    #[test]
    fn text_is_escaped() {
        let mut s = Svg::new(10.0, 10.0);
        s.text(0.0, 0.0, "a<b & \"c\"", 12.0, Anchor::Start, "#000", false);
        let out = s.finish("t<");
        assert!(out.contains("a&lt;b &amp; &quot;c&quot;"));
        assert!(out.contains("<title>t&lt;</title>"));
    }
}
