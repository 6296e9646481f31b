//! The decoder of a parsed YAML file: reads values of the expected types and ranges, collects
//! every problem with its position, and reports keys never asked for.
//!
//! The same decoders describe the files they read: in a describe pass (see [`crate::schema`]) every
//! value is a placeholder, and each key, type, range and choice asked for is noted instead of read.

use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};

use super::describe::{Child, Kind, Recorder};
use super::tree::{Diagnostic, Node, Pos, Value};

/// Collects diagnostics while a file is decoded.
pub struct Decoder {
    file: PathBuf,
    /// Every problem found so far.
    pub diags: Vec<Diagnostic>,
    /// The schema noted in a describe pass.
    schema: Option<Recorder>,
}

impl Decoder {
    /// A decoder for `file` (the path as it should appear in messages).
    pub fn new(file: &Path) -> Self {
        Decoder { file: file.to_path_buf(), diags: Vec::new(), schema: None }
    }

    /// A decoder for a describe pass, with the placeholder of the document's root.
    pub(crate) fn describing(file: &Path) -> (Self, Node) {
        let (recorder, root) = Recorder::new();
        let root = Node { pos: Pos::default(), value: Value::Slot(root) };
        (Decoder { file: file.to_path_buf(), diags: Vec::new(), schema: Some(recorder) }, root)
    }

    /// What a describe pass noted, as the JSON Schema of the document's root.
    pub(crate) fn into_schema(self) -> Option<serde_json::Value> {
        self.schema.map(|r| r.json(0))
    }

    /// In a describe pass, note that `node` takes `kind`: true when `node` is a placeholder (and
    /// holds no value to read).
    fn describe(&mut self, node: &Node, kind: Kind) -> bool {
        let Value::Slot(slot) = node.value else { return false };
        if let Some(r) = &mut self.schema {
            r.note(slot, kind);
        }
        true
    }

    /// The placeholder of a part of `slot` (a key's value, a list's items, a named entry).
    fn part(&mut self, slot: usize, child: Child<'_>) -> &'static Node {
        // Placeholders come only from a describe pass, whose decoder has its recorder.
        placeholder(self.schema.as_mut().map_or(slot, |r| r.child(slot, child)))
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
        if let Value::Slot(slot) = node.value {
            self.describe(node, Kind::Object);
            return Some(MapReader {
                pos: node.pos,
                entries: &[],
                used: Vec::new(),
                asked: Vec::new(),
                slot: Some(slot),
            });
        }
        match &node.value {
            Value::Map(entries) => Some(MapReader {
                pos: node.pos,
                entries,
                used: vec![false; entries.len()],
                asked: Vec::new(),
                slot: None,
            }),
            _ => self.type_error(node, &format!("a mapping ({what})")),
        }
    }

    /// A list.
    pub fn seq<'n>(&mut self, node: &'n Node) -> Option<&'n [Node]> {
        if let Value::Slot(slot) = node.value {
            self.describe(node, Kind::Array);
            return Some(std::slice::from_ref(self.part(slot, Child::Items)));
        }
        match &node.value {
            Value::Seq(items) => Some(items),
            _ => self.type_error(node, "a list"),
        }
    }

    /// A string.
    pub fn string(&mut self, node: &Node) -> Option<String> {
        if self.describe(node, Kind::String) {
            return None;
        }
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
        if self.describe(node, Kind::Bool) {
            return None;
        }
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
        if self.describe(node, Kind::Integer(*range.start(), *range.end())) {
            return None;
        }
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
        if self.describe(node, Kind::Number(*range.start(), *range.end())) {
            return None;
        }
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
        if self.describe(node, Kind::Ident) {
            return None;
        }
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
        if self.describe(node, Kind::Enum(choices.iter().map(|(n, _)| n.to_string()).collect())) {
            return None;
        }
        let s = self.string(node)?;
        if let Some((_, v)) = choices.iter().find(|(name, _)| *name == s) {
            return Some(*v);
        }
        let names: Vec<_> = choices.iter().map(|(n, _)| format!("`{n}`")).collect();
        self.error(node.pos, format!("unknown value `{s}`: expected one of {}", names.join(", ")));
        None
    }

    /// A value that is either a mapping (read with `map`) or something else (read with `other`).
    /// A describe pass reads both.
    pub fn either<T>(
        &mut self,
        node: &Node,
        map: impl FnOnce(&mut Decoder, &Node) -> Option<T>,
        other: impl FnOnce(&mut Decoder, &Node) -> Option<T>,
    ) -> Option<T> {
        match node.value {
            Value::Slot(_) => {
                let _ = map(self, node);
                other(self, node)
            }
            Value::Map(_) => map(self, node),
            _ => other(self, node),
        }
    }

    /// Whether the value is the word `word` (which a value of another type may stand beside, as
    /// `vlan: none` beside a VLAN id).
    pub fn is_word(&mut self, node: &Node, word: &str) -> bool {
        !self.describe(node, Kind::Enum(vec![word.to_string()])) && matches!(&node.value, Value::Str(s) if s == word)
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
    /// The mapping's place in the schema, in a describe pass.
    slot: Option<usize>,
}

impl<'n> MapReader<'n> {
    /// The value of `key`, if present.
    pub fn get(&mut self, d: &mut Decoder, key: &str) -> Option<&'n Node> {
        if let Some(slot) = self.slot {
            return Some(d.part(slot, Child::Key(key)));
        }
        if !self.asked.iter().any(|k| k == key) {
            self.asked.push(key.to_owned());
        }
        let i = self.entries.iter().position(|(_, k, _)| k == key)?;
        self.used[i] = true;
        Some(&self.entries[i].2)
    }

    /// The value of `key`, reporting its absence.
    pub fn req(&mut self, d: &mut Decoder, key: &str) -> Option<&'n Node> {
        let v = self.get(d, key);
        if let (Some(slot), Some(r)) = (self.slot, &mut d.schema) {
            r.require(slot, key);
        }
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
        match self.get(d, key) {
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

    /// Where the value of `key` is, without reading it.
    pub fn at(&self, key: &str) -> Option<Pos> {
        self.entries.iter().find(|(_, k, _)| k == key).map(|(_, _, v)| v.pos)
    }

    /// Every entry of a mapping whose keys are names (safe identifiers, see [`is_safe_ident`]);
    /// each other key is reported.
    pub fn names(&mut self, d: &mut Decoder) -> Vec<(&'n str, &'n Node)> {
        if let Some(slot) = self.slot {
            return vec![("name", d.part(slot, Child::Names))];
        }
        self.used.iter_mut().for_each(|u| *u = true);
        let entries: &'n [(Pos, String, Node)] = self.entries;
        for (pos, name, _) in entries.iter().filter(|(_, name, _)| !is_safe_ident(name)) {
            d.error(
                *pos,
                format!(
                    "`{name}` is not a safe name: use letters, digits, `_` and `-`, starting with a letter (at most 64)"
                ),
            );
        }
        entries.iter().map(|(_, name, v)| (name.as_str(), v)).collect()
    }

    /// Every entry of a mapping whose keys are among `names` (`what` they are), as the index of
    /// its key in `names` and its value; each other key is reported, and the flag says there were
    /// none.
    pub fn among(&mut self, d: &mut Decoder, names: &[&str], what: &str) -> (Vec<(usize, &'n Node)>, bool) {
        if let Some(slot) = self.slot {
            return (vec![(0, d.part(slot, Child::Among(names)))], true);
        }
        self.used.iter_mut().for_each(|u| *u = true);
        let mut out = Vec::new();
        let mut all_known = true;
        for (pos, key, v) in self.entries {
            match names.iter().position(|n| n == key) {
                Some(i) => out.push((i, v)),
                None => {
                    let hint = closest(key, names).map(|k| format!(" (did you mean `{k}`?)")).unwrap_or_default();
                    d.error(*pos, format!("unknown {what} `{key}`{hint}"));
                    all_known = false;
                }
            }
        }
        (out, all_known)
    }

    /// Report every key that was not read, suggesting the closest known key.
    pub fn finish(self, d: &mut Decoder, known: &[&str]) {
        if let (Some(slot), Some(r)) = (self.slot, &mut d.schema) {
            r.close(slot);
            return;
        }
        for ((pos, key, _), used) in self.entries.iter().zip(&self.used) {
            if !used {
                let hint = closest(key, known).map(|k| format!(" (did you mean `{k}`?)")).unwrap_or_default();
                d.error(*pos, format!("unknown key `{key}`{hint}"));
            }
        }
    }
}

/// The placeholder node of `slot`, for a describe pass. Placeholders live as long as the
/// process: a pass makes one per key of a document (a few hundred bytes).
fn placeholder(slot: usize) -> &'static Node {
    Box::leak(Box::new(Node { pos: Pos::default(), value: Value::Slot(slot) }))
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
    use crate::yaml::tree::parse;

    fn doc(src: &str) -> Node {
        parse(Path::new("t.yaml"), src).unwrap()
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
