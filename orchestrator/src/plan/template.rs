//! Command templates of host actions: shell text with `{{ variable }}` placeholders.
//!
//! Every value substituted into a template is shell-quoted, so that nothing taken from a plan or
//! an inventory can change the meaning of the command on the remote host. A list value expands to
//! one quoted word per element.

use std::collections::BTreeMap;
use std::fmt;

/// A parsed template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Template {
    source: String,
    parts: Vec<Part>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Part {
    Text(String),
    Var(String),
}

/// A value a template variable can take.
#[derive(Clone, Debug, PartialEq)]
pub enum TemplateValue {
    /// One word.
    Word(String),
    /// Several words (each quoted on its own).
    List(Vec<String>),
}

impl From<&str> for TemplateValue {
    fn from(s: &str) -> Self {
        TemplateValue::Word(s.to_string())
    }
}

impl From<String> for TemplateValue {
    fn from(s: String) -> Self {
        TemplateValue::Word(s)
    }
}

/// Variables available to a template.
pub type Vars = BTreeMap<&'static str, TemplateValue>;

/// A template that does not parse.
#[derive(Debug, PartialEq, Eq)]
pub struct TemplateError(pub String);

impl fmt::Display for TemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Template {
    /// Parse `{{ name }}` placeholders out of `source`.
    pub fn parse(source: &str) -> Result<Template, TemplateError> {
        let mut parts = Vec::new();
        let mut rest = source;
        while let Some(start) = rest.find("{{") {
            if start > 0 {
                parts.push(Part::Text(rest[..start].to_string()));
            }
            let after = &rest[start + 2..];
            let end = after
                .find("}}")
                .ok_or_else(|| TemplateError(format!("unclosed `{{{{` in template at `{}`", &rest[start..])))?;
            let name = after[..end].trim();
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(TemplateError(format!("`{{{{{}}}}}` is not a valid placeholder", &after[..end])));
            }
            parts.push(Part::Var(name.to_string()));
            rest = &after[end + 2..];
        }
        if !rest.is_empty() {
            parts.push(Part::Text(rest.to_string()));
        }
        Ok(Template { source: source.to_string(), parts })
    }

    /// The text as written.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Names of the variables the template uses, in order of appearance.
    pub fn variables(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::Var(v) => Some(v.as_str()),
            Part::Text(_) => None,
        })
    }

    /// The command with every variable substituted and quoted. Fails on the first variable that
    /// has no value.
    pub fn render(&self, vars: &Vars) -> Result<String, TemplateError> {
        let mut out = String::with_capacity(self.source.len() + 32);
        for p in &self.parts {
            match p {
                Part::Text(t) => out.push_str(t),
                Part::Var(name) => match vars.get(name.as_str()) {
                    Some(TemplateValue::Word(w)) => out.push_str(&shell_quote(w)),
                    // An empty list also takes the space before it, so that no double space is left.
                    Some(TemplateValue::List(items)) if items.is_empty() => {
                        if out.ends_with(' ') {
                            out.pop();
                        }
                    }
                    Some(TemplateValue::List(items)) => {
                        let quoted: Vec<String> = items.iter().map(|i| shell_quote(i)).collect();
                        out.push_str(&quoted.join(" "));
                    }
                    None => return Err(TemplateError(format!("no value for `{name}`"))),
                },
            }
        }
        Ok(out)
    }
}

/// Quote `s` as one word for a POSIX shell: kept as is when it only has characters that are never
/// special, else wrapped in single quotes (with embedded single quotes closed and escaped).
pub fn shell_quote(s: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "@%+=:,./_-".contains(c);
    if !s.is_empty() && s.chars().all(plain) { s.to_string() } else { format!("'{}'", s.replace('\'', r#"'\''"#)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&'static str, TemplateValue)]) -> Vars {
        pairs.iter().cloned().collect()
    }

    #[test]
    fn renders_and_quotes_values() {
        let t = Template::parse("xbflash2 program --spi --image {{ image }} -d {{bdf}}").unwrap();
        assert_eq!(t.variables().collect::<Vec<_>>(), ["image", "bdf"]);
        let v = vars(&[("image", "/opt/bit streams/fwd.mcs".into()), ("bdf", "0000:d8:00.0".into())]);
        assert_eq!(t.render(&v).unwrap(), "xbflash2 program --spi --image '/opt/bit streams/fwd.mcs' -d 0000:d8:00.0");
    }

    #[test]
    fn lists_expand_to_quoted_words() {
        let t = Template::parse("for d in {{ devs }}; do echo 1 > /sys/bus/pci/devices/$d/remove; done").unwrap();
        let v = vars(&[("devs", TemplateValue::List(vec!["0000:d8:00.0".into(), "a b".into()]))]);
        assert_eq!(
            t.render(&v).unwrap(),
            "for d in 0000:d8:00.0 'a b'; do echo 1 > /sys/bus/pci/devices/$d/remove; done"
        );
        let t = Template::parse("agent capture {{ extra }} -- {{ eal }}").unwrap();
        let v = vars(&[
            ("extra", TemplateValue::List(vec![])),
            ("eal", TemplateValue::List(vec!["-l".into(), "2".into()])),
        ]);
        assert_eq!(t.render(&v).unwrap(), "agent capture -- -l 2", "an empty list leaves no double space");
    }

    #[test]
    fn shell_metacharacters_cannot_escape_the_quotes() {
        for hostile in ["x; rm -rf /", "$(reboot)", "`id`", "it's", "a\nb", ""] {
            let q = shell_quote(hostile);
            assert!(q.starts_with('\''), "{q}");
            // Undo the quoting the way a POSIX shell would and get the original back.
            let inner = &q[1..q.len() - 1];
            assert_eq!(inner.replace(r#"'\''"#, "'"), hostile);
        }
        assert_eq!(shell_quote("0000:d8:00.0"), "0000:d8:00.0");
    }

    #[test]
    fn a_real_shell_reads_back_the_exact_value() {
        for hostile in ["x; echo pwned", "$(id)", "it's \"q\"", "*", "a  b\tc"] {
            let out = std::process::Command::new("sh")
                .arg("-c")
                .arg(format!("printf %s {}", shell_quote(hostile)))
                .output()
                .unwrap();
            assert_eq!(String::from_utf8(out.stdout).unwrap(), hostile);
        }
    }

    #[test]
    fn shell_style_braces_are_left_alone() {
        let t = Template::parse("echo ${HOME} {x}").unwrap();
        assert_eq!(t.variables().count(), 0);
        assert_eq!(t.render(&Vars::new()).unwrap(), "echo ${HOME} {x}");
    }

    #[test]
    fn malformed_placeholders_are_errors() {
        assert!(Template::parse("a {{ b").is_err());
        assert!(Template::parse("a {{ b c }}").is_err());
        assert!(Template::parse("a {{}}").is_err());
        let t = Template::parse("{{ missing }}").unwrap();
        assert_eq!(t.render(&Vars::new()).unwrap_err().0, "no value for `missing`");
    }
}
