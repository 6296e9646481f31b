//! What a describe pass notes: for each placeholder of a document, the types, keys, ranges and
//! choices its decoder asked for, and the JSON Schema they make.
//!
//! A describe pass runs a file's decoder over placeholders instead of a parsed file (see
//! [`super::decoder`]); [`crate::schema`] turns a whole document's notes into its schema.

use serde_json::{Map, Value, json};

/// What a value was read as.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Kind {
    Object,
    Array,
    String,
    /// A safe identifier (see [`super::is_safe_ident`]).
    Ident,
    /// One of these words.
    Enum(Vec<String>),
    Bool,
    /// An integer in this inclusive range.
    Integer(i64, i64),
    /// A number in this inclusive range.
    Number(f64, f64),
}

/// A part of a value that has its own schema.
pub(super) enum Child<'a> {
    /// The value of a key.
    Key(&'a str),
    /// The items of a list.
    Items,
    /// The values of a mapping keyed by names (safe identifiers).
    Names,
    /// The values of a mapping keyed by these words.
    Among(&'a [&'a str]),
}

/// Keys of a mapping whose keys are not fixed.
#[derive(Debug)]
enum Keys {
    Names,
    Among(Vec<String>),
}

/// What the pass noted about one value.
#[derive(Debug, Default)]
struct Slot {
    kinds: Vec<Kind>,
    keys: Vec<(String, usize)>,
    required: Vec<String>,
    /// Whether keys other than `keys` are refused.
    closed: bool,
    items: Option<usize>,
    entries: Option<(Keys, usize)>,
}

/// The notes of a describe pass: one slot per placeholder, the root first.
#[derive(Debug)]
pub(super) struct Recorder {
    slots: Vec<Slot>,
}

/// The pattern of a safe identifier.
const IDENT_PATTERN: &str = "^[A-Za-z][A-Za-z0-9_-]{0,63}$";

impl Recorder {
    /// A recorder with the root's slot (number 0).
    pub(super) fn new() -> (Self, usize) {
        (Recorder { slots: vec![Slot::default()] }, 0)
    }

    pub(super) fn note(&mut self, slot: usize, kind: Kind) {
        let kinds = &mut self.slots[slot].kinds;
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }

    pub(super) fn require(&mut self, slot: usize, key: &str) {
        let required = &mut self.slots[slot].required;
        if !required.iter().any(|k| k == key) {
            required.push(key.to_string());
        }
    }

    pub(super) fn close(&mut self, slot: usize) {
        self.slots[slot].closed = true;
    }

    /// The slot of a part of `slot`, made on first use.
    pub(super) fn child(&mut self, slot: usize, child: Child<'_>) -> usize {
        let s = &self.slots[slot];
        let found = match &child {
            Child::Key(k) => s.keys.iter().find(|(name, _)| name == k).map(|(_, i)| *i),
            Child::Items => s.items,
            Child::Names | Child::Among(_) => s.entries.as_ref().map(|(_, i)| *i),
        };
        if let Some(i) = found {
            return i;
        }
        let i = self.slots.len();
        self.slots.push(Slot::default());
        let s = &mut self.slots[slot];
        match child {
            Child::Key(k) => s.keys.push((k.to_string(), i)),
            Child::Items => s.items = Some(i),
            Child::Names => s.entries = Some((Keys::Names, i)),
            Child::Among(names) => s.entries = Some((Keys::Among(names.iter().map(|n| n.to_string()).collect()), i)),
        }
        i
    }

    /// The schema of `slot`: `{}` when nothing was read there, `anyOf` when it was read in
    /// several ways.
    pub(super) fn json(&self, slot: usize) -> Value {
        let mut alternatives: Vec<Value> = self.slots[slot].kinds.iter().map(|k| self.kind_json(slot, k)).collect();
        match alternatives.len() {
            0 => json!({}),
            1 => alternatives.remove(0),
            _ => json!({ "anyOf": alternatives }),
        }
    }

    fn kind_json(&self, slot: usize, kind: &Kind) -> Value {
        let s = &self.slots[slot];
        match kind {
            Kind::Object => {
                let mut o = Map::new();
                o.insert("type".into(), json!("object"));
                if !s.keys.is_empty() {
                    let props: Map<String, Value> = s.keys.iter().map(|(k, i)| (k.clone(), self.json(*i))).collect();
                    o.insert("properties".into(), Value::Object(props));
                }
                if !s.required.is_empty() {
                    o.insert("required".into(), json!(s.required));
                }
                match &s.entries {
                    Some((keys, i)) => {
                        let names = match keys {
                            Keys::Names => json!({ "pattern": IDENT_PATTERN }),
                            Keys::Among(words) => json!({ "enum": words }),
                        };
                        o.insert("propertyNames".into(), names);
                        o.insert("additionalProperties".into(), self.json(*i));
                    }
                    None if s.closed => {
                        o.insert("additionalProperties".into(), json!(false));
                    }
                    None => {}
                }
                Value::Object(o)
            }
            Kind::Array => match s.items {
                Some(i) => json!({ "type": "array", "items": self.json(i) }),
                None => json!({ "type": "array" }),
            },
            Kind::String => json!({ "type": "string" }),
            Kind::Ident => json!({ "type": "string", "pattern": IDENT_PATTERN }),
            Kind::Enum(words) => json!({ "enum": words }),
            Kind::Bool => json!({ "type": "boolean" }),
            Kind::Integer(min, max) => json!({ "type": "integer", "minimum": min, "maximum": max }),
            Kind::Number(min, max) => json!({ "type": "number", "minimum": min, "maximum": max }),
        }
    }
}
