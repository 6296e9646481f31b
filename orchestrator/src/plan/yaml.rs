//! A YAML tree with line:column positions, and a decoder that collects every diagnostic instead of
//! stopping at the first one.
//!
//! Plans, bitstream manifests and inventories are decoded by hand from this tree (not with serde)
//! so that unknown keys, wrong types and out-of-range values are all reported in one pass, each with
//! its own position.

use std::fmt;
use std::io::Read;
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};

use saphyr::{LoadableYamlNode, MarkedYaml, Scalar, YamlData};

/// 1-based line and column of a node in its source file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Pos {
    /// Line, from 1.
    pub line: u32,
    /// Column, from 1.
    pub col: u32,
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

/// A YAML value with its position.
#[derive(Clone, Debug)]
pub struct Node {
    /// Where the value starts.
    pub pos: Pos,
    /// The value.
    pub value: Value,
}

/// The shapes a YAML value can take.
#[derive(Clone, Debug)]
pub enum Value {
    /// `~`, `null` or nothing.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A floating-point number.
    Float(f64),
    /// A string.
    Str(String),
    /// A sequence.
    Seq(Vec<Node>),
    /// A mapping with string keys, in source order; each key keeps its own position.
    Map(Vec<(Pos, String, Node)>),
}

impl Value {
    /// The YAML type name used in diagnostics.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Int(_) => "an integer",
            Value::Float(_) => "a number",
            Value::Str(_) => "a string",
            Value::Seq(_) => "a list",
            Value::Map(_) => "a mapping",
        }
    }
}

/// One problem found in an input file.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Diagnostic {
    /// The file, as named to the user.
    pub file: PathBuf,
    /// Where in the file.
    pub pos: Pos,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.file.display(), self.pos, self.message)
    }
}

fn pos_of(m: &saphyr::Marker) -> Pos {
    Pos { line: m.line() as u32, col: m.col() as u32 + 1 }
}

/// Largest YAML file read (plan, inventory, bitstream manifest, simulator model): 1 MiB. Real
/// files are a few KiB; the cap keeps `validate /dev/zero` or a mistaken multi-GB file from
/// exhausting memory.
pub const MAX_YAML_BYTES: u64 = 1 << 20;

/// The text of a YAML file: a regular file of at most [`MAX_YAML_BYTES`], in UTF-8. Problems are
/// reported at 1:1 of the file.
pub fn read_source(path: &Path) -> Result<String, Diagnostic> {
    let fail = |message: String| Diagnostic { file: path.to_path_buf(), pos: Pos { line: 1, col: 1 }, message };
    // Checked before opening: opening a FIFO would block until a writer appears.
    let meta = std::fs::metadata(path).map_err(|e| fail(format!("cannot read: {e}")))?;
    if !meta.is_file() {
        let what = if meta.is_dir() { "a directory" } else { "a device, pipe or socket" };
        return Err(fail(format!("cannot read: not a regular file ({what})")));
    }
    let file = std::fs::File::open(path).map_err(|e| fail(format!("cannot read: {e}")))?;
    let mut bytes = Vec::new();
    file.take(MAX_YAML_BYTES + 1).read_to_end(&mut bytes).map_err(|e| fail(format!("cannot read: {e}")))?;
    if bytes.len() as u64 > MAX_YAML_BYTES {
        return Err(fail(format!(
            "cannot read: the file is larger than {} bytes (1 MiB), the limit for YAML files",
            MAX_YAML_BYTES
        )));
    }
    String::from_utf8(bytes)
        .map_err(|e| fail(format!("cannot read: not UTF-8 text (byte {})", e.utf8_error().valid_up_to())))
}

/// Parse one YAML document. A syntax error is returned as a diagnostic.
pub fn parse(file: &Path, src: &str) -> Result<Node, Diagnostic> {
    let syntax = |pos: Pos, message: String| Diagnostic { file: file.to_path_buf(), pos, message };
    let docs = MarkedYaml::load_from_str(src)
        .map_err(|e| syntax(pos_of(e.marker()), format!("YAML syntax error: {}", e.info())))?;
    match docs.len() {
        0 => Err(syntax(Pos { line: 1, col: 1 }, "the file is empty".into())),
        1 => convert(file, &docs[0]),
        _ => Err(syntax(pos_of(&docs[1].span.start), "only one YAML document is allowed per file".into())),
    }
}

fn convert(file: &Path, y: &MarkedYaml<'_>) -> Result<Node, Diagnostic> {
    let pos = pos_of(&y.span.start);
    let err = |message: &str| Diagnostic { file: file.to_path_buf(), pos, message: message.into() };
    let value = match &y.data {
        YamlData::Value(Scalar::Null) => Value::Null,
        YamlData::Value(Scalar::Boolean(b)) => Value::Bool(*b),
        YamlData::Value(Scalar::Integer(i)) => Value::Int(*i),
        YamlData::Value(Scalar::FloatingPoint(f)) => Value::Float(f.into_inner()),
        YamlData::Value(Scalar::String(s)) => Value::Str(s.to_string()),
        YamlData::Representation(s, _, _) => Value::Str(s.to_string()),
        YamlData::Sequence(items) => Value::Seq(items.iter().map(|i| convert(file, i)).collect::<Result<_, _>>()?),
        YamlData::Mapping(map) => {
            let mut entries = Vec::with_capacity(map.len());
            for (k, v) in map {
                let key = match &k.data {
                    YamlData::Value(Scalar::String(s)) => s.to_string(),
                    YamlData::Value(Scalar::Integer(i)) => i.to_string(),
                    YamlData::Representation(s, _, _) => s.to_string(),
                    // `null:` is a key of plans and manifests; YAML reads the bare word as null.
                    YamlData::Value(Scalar::Null) => "null".to_string(),
                    _ => {
                        return Err(Diagnostic {
                            file: file.to_path_buf(),
                            pos: pos_of(&k.span.start),
                            message: "mapping keys must be plain strings".into(),
                        });
                    }
                };
                entries.push((pos_of(&k.span.start), key, convert(file, v)?));
            }
            Value::Map(entries)
        }
        YamlData::Tagged(..) => return Err(err("YAML tags are not supported here")),
        YamlData::Alias(_) => return Err(err("YAML aliases are not supported here")),
        YamlData::BadValue => return Err(err("invalid YAML value")),
    };
    Ok(Node { pos, value })
}

/// Collects diagnostics while a file is decoded.
pub struct Decoder {
    file: PathBuf,
    /// Every problem found so far.
    pub diags: Vec<Diagnostic>,
}

impl Decoder {
    /// A decoder for `file` (the path as it should appear in messages).
    pub fn new(file: &Path) -> Self {
        Decoder { file: file.to_path_buf(), diags: Vec::new() }
    }

    /// The file being decoded.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// Record a problem at `pos`.
    pub fn error(&mut self, pos: Pos, message: impl Into<String>) {
        self.diags.push(Diagnostic { file: self.file.clone(), pos, message: message.into() });
    }

    fn type_error<T>(&mut self, node: &Node, want: &str) -> Option<T> {
        self.error(node.pos, format!("expected {want}, found {}", node.value.kind()));
        None
    }

    /// A mapping, for reading its keys.
    pub fn map<'n>(&mut self, node: &'n Node, what: &str) -> Option<MapReader<'n>> {
        match &node.value {
            Value::Map(entries) => {
                Some(MapReader { pos: node.pos, entries, used: vec![false; entries.len()], asked: Vec::new() })
            }
            _ => self.type_error(node, &format!("a mapping ({what})")),
        }
    }

    /// A list.
    pub fn seq<'n>(&mut self, node: &'n Node) -> Option<&'n [Node]> {
        match &node.value {
            Value::Seq(items) => Some(items),
            _ => self.type_error(node, "a list"),
        }
    }

    /// A string.
    pub fn string(&mut self, node: &Node) -> Option<String> {
        match &node.value {
            Value::Str(s) => Some(s.clone()),
            Value::Int(_) | Value::Float(_) | Value::Bool(_) | Value::Null => {
                self.type_error(node, "a string (put the value in quotes)")
            }
            _ => self.type_error(node, "a string"),
        }
    }

    /// A boolean.
    pub fn boolean(&mut self, node: &Node) -> Option<bool> {
        match node.value {
            Value::Bool(b) => Some(b),
            _ => self.type_error(node, "true or false"),
        }
    }

    /// An integer within `range`, as the unsigned type the value is kept in (`range` must fit it).
    pub fn uint<T: TryFrom<i64>>(&mut self, node: &Node, range: RangeInclusive<i64>) -> Option<T> {
        self.int(node, range).and_then(|i| T::try_from(i).ok())
    }

    /// An integer within `range`.
    pub fn int(&mut self, node: &Node, range: RangeInclusive<i64>) -> Option<i64> {
        match node.value {
            Value::Int(i) if range.contains(&i) => Some(i),
            Value::Int(i) => {
                self.error(node.pos, format!("{i} is out of range ({}..={})", range.start(), range.end()));
                None
            }
            _ => self.type_error(node, "an integer"),
        }
    }

    /// A number (integer or float) within `range`.
    pub fn number(&mut self, node: &Node, range: RangeInclusive<f64>) -> Option<f64> {
        let v = match node.value {
            Value::Int(i) => i as f64,
            Value::Float(f) => f,
            _ => return self.type_error(node, "a number"),
        };
        if range.contains(&v) {
            Some(v)
        } else {
            self.error(node.pos, format!("{v} is out of range ({}..={})", range.start(), range.end()));
            None
        }
    }

    /// A string that is a safe identifier (see [`is_safe_ident`]).
    pub fn ident(&mut self, node: &Node) -> Option<String> {
        let s = self.string(node)?;
        if is_safe_ident(&s) {
            Some(s)
        } else {
            self.error(
                node.pos,
                format!(
                    "`{s}` is not a safe name: use letters, digits, `_` and `-`, starting with a letter (at most 64)"
                ),
            );
            None
        }
    }

    /// One of a fixed set of words.
    pub fn choice<T: Copy>(&mut self, node: &Node, choices: &[(&str, T)]) -> Option<T> {
        let s = self.string(node)?;
        if let Some((_, v)) = choices.iter().find(|(name, _)| *name == s) {
            return Some(*v);
        }
        let names: Vec<_> = choices.iter().map(|(n, _)| format!("`{n}`")).collect();
        self.error(node.pos, format!("unknown value `{s}`: expected one of {}", names.join(", ")));
        None
    }

    /// A path relative to the decoded file's folder. Missing files are reported when `must_exist`.
    pub fn path(&mut self, node: &Node, must_exist: bool) -> Option<PathBuf> {
        let s = self.string(node)?;
        let resolved = resolve(&self.file, &s);
        if must_exist && !resolved.exists() {
            self.error(node.pos, format!("file not found: {s} (looked for {})", resolved.display()));
            return None;
        }
        Some(resolved)
    }
}

/// `rel` resolved against the folder of `file` (absolute paths and `~/` are kept as given / expanded).
pub fn resolve(file: &Path, rel: &str) -> PathBuf {
    if let Some(rest) = rel.strip_prefix("~/")
        && let Some(home) = std::env::var_os("HOME")
    {
        return PathBuf::from(home).join(rest);
    }
    let p = Path::new(rel);
    if p.is_absolute() {
        return p.to_path_buf();
    }
    let base = file.parent().unwrap_or(Path::new(""));
    normalize(&base.join(p))
}

/// Lexically remove `.` and `dir/..` pairs so that paths in messages and plans stay readable.
fn normalize(p: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir if matches!(out.components().next_back(), Some(Component::Normal(_))) => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    if out.as_os_str().is_empty() { PathBuf::from(".") } else { out }
}

/// Whether `s` is usable as a name in paths, templates and results: `[A-Za-z][A-Za-z0-9_-]{0,63}`.
pub fn is_safe_ident(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic())
        && s.len() <= 64
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Reads the keys of one mapping; keys never asked for are reported by [`MapReader::finish`] or
/// [`MapReader::done`].
///
/// Each field is stated once, with its key, its decoder and its default:
/// `m.or(d, "idle_gap_s", 5.0, |d, v| d.number(v, 0.0..=86_400.0))`.
pub struct MapReader<'n> {
    /// Position of the mapping.
    pub pos: Pos,
    entries: &'n [(Pos, String, Node)],
    used: Vec<bool>,
    /// Every key asked for, the known keys of [`MapReader::done`].
    asked: Vec<String>,
}

impl<'n> MapReader<'n> {
    /// The value of `key`, if present.
    pub fn get(&mut self, key: &str) -> Option<&'n Node> {
        if !self.asked.iter().any(|k| k == key) {
            self.asked.push(key.to_owned());
        }
        let i = self.entries.iter().position(|(_, k, _)| k == key)?;
        self.used[i] = true;
        Some(&self.entries[i].2)
    }

    /// The value of `key`, reporting its absence.
    pub fn req(&mut self, d: &mut Decoder, key: &str) -> Option<&'n Node> {
        let v = self.get(key);
        if v.is_none() {
            d.error(self.pos, format!("missing key `{key}`"));
        }
        v
    }

    /// `key` decoded with `decode`, reporting its absence.
    pub fn required<T>(
        &mut self,
        d: &mut Decoder,
        key: &str,
        decode: impl FnOnce(&mut Decoder, &'n Node) -> Option<T>,
    ) -> Option<T> {
        self.req(d, key).and_then(|n| decode(d, n))
    }

    /// `key` decoded with `decode`, or `default` when it is absent.
    pub fn or<T>(
        &mut self,
        d: &mut Decoder,
        key: &str,
        default: T,
        decode: impl FnOnce(&mut Decoder, &'n Node) -> Option<T>,
    ) -> Option<T> {
        match self.get(key) {
            Some(n) => decode(d, n),
            None => Some(default),
        }
    }

    /// `key` decoded with `decode` when present: `Some(None)` when absent, `None` when invalid.
    pub fn optional<T>(
        &mut self,
        d: &mut Decoder,
        key: &str,
        decode: impl FnOnce(&mut Decoder, &'n Node) -> Option<T>,
    ) -> Option<Option<T>> {
        self.or(d, key, None, |d, n| decode(d, n).map(Some))
    }

    /// Report every key that was not read, suggesting the closest key asked for.
    pub fn done(mut self, d: &mut Decoder) {
        let asked = std::mem::take(&mut self.asked);
        let known: Vec<&str> = asked.iter().map(String::as_str).collect();
        self.finish(d, &known);
    }

    /// Every entry, marking all as used (for mappings whose keys are names).
    pub fn entries(&mut self) -> &'n [(Pos, String, Node)] {
        self.used.iter_mut().for_each(|u| *u = true);
        self.entries
    }

    /// Report every key that was not read, suggesting the closest known key.
    pub fn finish(self, d: &mut Decoder, known: &[&str]) {
        for ((pos, key, _), used) in self.entries.iter().zip(&self.used) {
            if !used {
                let hint = closest(key, known).map(|k| format!(" (did you mean `{k}`?)")).unwrap_or_default();
                d.error(*pos, format!("unknown key `{key}`{hint}"));
            }
        }
    }
}

/// The candidate nearest to `word` by edit distance, if it is close enough to be a likely typo.
pub fn closest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    candidates
        .iter()
        .map(|c| (edit_distance(word, c), *c))
        .filter(|(dist, c)| *dist <= (c.len().max(word.len()) / 3).max(1))
        .min()
        .map(|(_, c)| c)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != *cb)).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(src: &str) -> Node {
        parse(Path::new("t.yaml"), src).unwrap()
    }

    #[test]
    fn positions_are_one_based_and_point_at_values_and_keys() {
        let n = doc("a: 1\nb:\n  c: x\n");
        let Value::Map(entries) = &n.value else { panic!("not a map") };
        assert_eq!(entries[0].0, Pos { line: 1, col: 1 });
        assert_eq!(entries[0].2.pos, Pos { line: 1, col: 4 });
        let Value::Map(inner) = &entries[1].2.value else { panic!("not a map") };
        assert_eq!(inner[0].0, Pos { line: 3, col: 3 });
        assert_eq!(inner[0].2.pos, Pos { line: 3, col: 6 });
    }

    #[test]
    fn syntax_errors_and_duplicate_keys_carry_a_position() {
        let e = parse(Path::new("t.yaml"), "a: 1\na: 2\n").unwrap_err();
        assert_eq!(e.pos.line, 2);
        assert!(e.message.contains("duplicated key"), "{}", e.message);
        let e = parse(Path::new("t.yaml"), "a: [1, 2\n").unwrap_err();
        assert!(e.message.starts_with("YAML syntax error"), "{}", e.message);
    }

    #[test]
    fn decoder_collects_all_problems() {
        let n = doc("sessions: 0\nruns: many\nextra: 1\n");
        let mut d = Decoder::new(Path::new("p.yaml"));
        let mut m = d.map(&n, "protocol").unwrap();
        let s = m.req(&mut d, "sessions").and_then(|v| d.int(v, 1..=100));
        let r = m.req(&mut d, "runs").and_then(|v| d.int(v, 1..=100));
        let _ = m.req(&mut d, "pacing_pps");
        m.finish(&mut d, &["sessions", "runs", "pacing_pps"]);
        assert_eq!((s, r), (None, None));
        let msgs: Vec<String> = d.diags.iter().map(ToString::to_string).collect();
        assert_eq!(
            msgs,
            [
                "p.yaml:1:11: 0 is out of range (1..=100)",
                "p.yaml:2:7: expected an integer, found a string",
                "p.yaml:1:1: missing key `pacing_pps`",
                "p.yaml:3:1: unknown key `extra`",
            ]
        );
    }

    #[test]
    fn typos_get_a_suggestion() {
        assert_eq!(closest("sesions", &["sessions", "runs"]), Some("sessions"));
        assert_eq!(closest("zzz", &["sessions", "runs"]), None);
    }

    #[test]
    fn safe_identifiers() {
        for ok in ["forward", "Five_Tuple", "null-fwd", "a1"] {
            assert!(is_safe_ident(ok), "{ok}");
        }
        for bad in ["", "1x", "a b", "x;rm", "../x", "é", &"a".repeat(65)] {
            assert!(!is_safe_ident(bad), "{bad}");
        }
    }

    #[test]
    fn relative_paths_resolve_against_the_file() {
        assert_eq!(resolve(Path::new("plans/p.yaml"), "../bitstreams/f.yaml"), PathBuf::from("bitstreams/f.yaml"));
        assert_eq!(resolve(Path::new("p.yaml"), "x/y"), PathBuf::from("x/y"));
        assert_eq!(resolve(Path::new("plans/p.yaml"), "/abs"), PathBuf::from("/abs"));
    }
}

impl Diagnostic {
    /// The message followed by the offending source line and a caret under the column, for
    /// terminals. `src` is the text of [`Diagnostic::file`].
    pub fn with_snippet(&self, src: &str) -> String {
        let mut out = self.to_string();
        if let Some(line) = src.lines().nth((self.pos.line as usize).saturating_sub(1)) {
            let n = self.pos.line.to_string();
            let pad = " ".repeat(n.len());
            let caret_at: String = line
                .chars()
                .take((self.pos.col as usize).saturating_sub(1))
                .map(|c| if c == '\t' { '\t' } else { ' ' })
                .collect();
            out.push_str(&format!("\n{pad} |\n{n} | {line}\n{pad} | {caret_at}^"));
        }
        out
    }
}

#[cfg(test)]
mod snippet_tests {
    use super::*;

    #[test]
    fn snippet_points_at_the_column() {
        let d = Diagnostic { file: "p.yaml".into(), pos: Pos { line: 2, col: 5 }, message: "bad".into() };
        assert_eq!(d.with_snippet("a: 1\nb:  x\n"), "p.yaml:2:5: bad\n  |\n2 | b:  x\n  |     ^");
    }
}
