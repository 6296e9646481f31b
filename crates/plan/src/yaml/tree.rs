//! A YAML tree with line:column positions, read from a file within a size limit, and the
//! diagnostics that point into it.

use std::fmt;
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
    /// A placeholder of a describe pass (see [`crate::schema`]): the part of the schema it stands
    /// for. Never read from a file.
    Slot(usize),
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
            Value::Slot(_) => "a placeholder",
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
    let bytes =
        latency_files::read_capped(path, MAX_YAML_BYTES, "YAML file").map_err(|e| fail(format!("cannot read: {e}")))?;
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
