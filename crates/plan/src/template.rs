//! Command templates of host actions: shell text with `{{ variable }}` placeholders.
//!
//! Every value substituted into a template is shell-quoted, so that nothing taken from a plan or
//! an inventory can change the meaning of the command on the remote host. A list value expands to
//! one quoted word per element. Quoting only protects a value where the shell starts a new word:
//! [`Template::misplaced`] finds the placeholders that are not whole words (inside quotes, after a
//! backslash or `$`, glued to other text).

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

/// A placeholder that is not a whole shell word (see [`Template::misplaced`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Misplaced {
    /// The variable.
    pub name: String,
    /// What is wrong and what to do, as a diagnostic message.
    pub message: String,
}

/// Shell quoting context at a point of a template.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ctx {
    /// Unquoted text, or a `$(…)` substitution with this many open parentheses inside it.
    Plain(Option<u32>),
    Single,
    Double,
    Backtick,
}

/// Characters that end a shell word when unquoted (besides whitespace).
const OPERATORS: &str = ";|&()<>";

/// Characters a literal suffix of a placeholder may have (the ones [`shell_quote`] never quotes).
fn plain(c: char) -> bool {
    c.is_ascii_alphanumeric() || "@%+=:,./_-".contains(c)
}

/// Whether `word` is an option or an assignment waiting for its value: `--name=`, `-n=`, `name=`.
fn option_prefix(word: &str) -> bool {
    let Some(name) = word.strip_suffix('=') else { return false };
    let name = name.trim_start_matches('-');
    word.len() - name.len() <= 3
        && name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Follows the shell's quoting through a template's text.
struct Lexer {
    stack: Vec<Ctx>,
    /// Text of the current word so far (placeholders included, as written).
    word: String,
    escaped: bool,
}

impl Lexer {
    fn top(&self) -> Ctx {
        self.stack.last().copied().unwrap_or(Ctx::Plain(None))
    }

    fn feed(&mut self, text: &str) {
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            if self.escaped {
                self.escaped = false;
                self.word.push(c);
                continue;
            }
            let top = self.top();
            let subst = c == '$' && chars.peek() == Some(&'(');
            match top {
                Ctx::Single if c == '\'' => {
                    self.stack.pop();
                }
                Ctx::Single => {}
                Ctx::Plain(depth) if c.is_whitespace() || OPERATORS.contains(c) => {
                    match (c, depth) {
                        (')', Some(0)) => {
                            self.stack.pop();
                        }
                        ('(' | ')', Some(n)) => {
                            let n = if c == '(' { n + 1 } else { n - 1 };
                            if let Some(top) = self.stack.last_mut() {
                                *top = Ctx::Plain(Some(n));
                            }
                        }
                        _ => {}
                    }
                    self.word.clear();
                    continue;
                }
                Ctx::Plain(_) | Ctx::Double | Ctx::Backtick if subst => {
                    chars.next();
                    self.stack.push(Ctx::Plain(Some(0)));
                    self.word.clear();
                    continue;
                }
                Ctx::Double if c == '"' => {
                    self.stack.pop();
                }
                Ctx::Backtick if c == '`' => {
                    self.stack.pop();
                }
                Ctx::Plain(_) | Ctx::Double | Ctx::Backtick => match c {
                    '\\' => self.escaped = true,
                    '`' => self.stack.push(Ctx::Backtick),
                    '"' if top != Ctx::Double => self.stack.push(Ctx::Double),
                    '\'' if top != Ctx::Double => self.stack.push(Ctx::Single),
                    _ => {}
                },
            }
            self.word.push(c);
        }
    }
}

impl Template {
    /// Placeholders that are not whole shell words. A value is substituted shell-quoted, which
    /// keeps it one literal word only where the shell reads it as a word of its own: inside quotes
    /// the quotes become literal text (a backtick or `$(…)` in the value then runs), and after a
    /// backslash or a `$` they change meaning. So a placeholder must stand unquoted at the start
    /// of a word — after whitespace, the start, or one of `;|&()<>`, also inside `$(…)` — or as
    /// the value of an option or assignment (`--pps={{ pacing_pps }}`, `p={{ pid }}`); literal
    /// path text may follow it (`{{ session_dir }}/ctl`). A list (`is_list`) must stand alone.
    pub fn misplaced(&self, is_list: impl Fn(&str) -> bool) -> Vec<Misplaced> {
        let mut out = Vec::new();
        let mut lexer = Lexer { stack: Vec::new(), word: String::new(), escaped: false };
        let mut after: Option<&str> = None;
        let mut report = |name: &str, what: String| {
            let message = if is_list(name) {
                format!("placeholder `{{{{ {name} }}}}` is a list of words and must stand alone; {what}")
            } else {
                format!(
                    "placeholder `{{{{ {name} }}}}` must be a whole shell word (it is substituted shell-quoted); {what}"
                )
            };
            out.push(Misplaced { name: name.to_owned(), message });
        };
        for part in &self.parts {
            match part {
                Part::Text(text) => {
                    if let Some(name) = after.take() {
                        let suffix: String =
                            text.chars().take_while(|&c| !c.is_whitespace() && !OPERATORS.contains(c)).collect();
                        if !suffix.is_empty() && (is_list(name) || !suffix.chars().all(plain)) {
                            report(name, format!("separate it from `{suffix}` after it"));
                        }
                    }
                    lexer.feed(text);
                }
                Part::Var(name) => {
                    after = None;
                    let what = match lexer.top() {
                        Ctx::Single | Ctx::Double => Some("remove the surrounding quotes".to_owned()),
                        Ctx::Backtick => Some("use `$(…)` instead of backquotes".to_owned()),
                        Ctx::Plain(_) if lexer.word.is_empty() => None,
                        Ctx::Plain(_) if option_prefix(&lexer.word) && !is_list(name) => None,
                        Ctx::Plain(_) => Some(format!("separate it from `{}` before it", lexer.word)),
                    };
                    if let Some(what) = what {
                        report(name, what);
                    } else {
                        after = Some(name);
                    }
                    lexer.word.push_str(&format!("{{{{ {name} }}}}"));
                }
            }
        }
        out
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

    fn misplaced(src: &str) -> Vec<String> {
        Template::parse(src).unwrap().misplaced(|v| v == "list").into_iter().map(|m| m.message).collect()
    }

    #[test]
    fn placeholders_that_are_whole_words_pass() {
        for ok in [
            "{{ v }}",
            "tcpreplay -i {{ v }} --pps={{ v }} {{ v }}",
            "p={{ v }} && kill \"$p\"",
            "mkdir -p \"$(dirname {{ v }})\" && x=$(cat {{ v }}) && y=`date`",
            "a;{{ v }}|b&&({{ v }})<{{ v }}>{{ v }} 2>{{ v }}",
            "{ setsid {{ v }} --control {{ v }}/ctl 2> {{ v }}.log & }",
            "echo '{x}' \"{y}\" ${HOME} {{ list }} -- {{ list }}",
            "for i in {{ list }}; do ip link set \"$i\" up; done",
        ] {
            assert_eq!(misplaced(ok), Vec::<String>::new(), "{ok}");
        }
    }

    #[test]
    fn placeholders_inside_quotes_or_glued_to_text_are_reported() {
        let word = "must be a whole shell word (it is substituted shell-quoted)";
        let cases: [(&str, String); 11] = [
            (
                "ip link set \"{{ sender_iface }}\" up",
                format!("placeholder `{{{{ sender_iface }}}}` {word}; remove the surrounding quotes"),
            ),
            ("echo '{{v}}'", format!("placeholder `{{{{ v }}}}` {word}; remove the surrounding quotes")),
            ("echo \"a $(cat x) {{ v }}\"", format!("placeholder `{{{{ v }}}}` {word}; remove the surrounding quotes")),
            ("echo x{{ v }}", format!("placeholder `{{{{ v }}}}` {word}; separate it from `x` before it")),
            ("echo \\{{ v }}", format!("placeholder `{{{{ v }}}}` {word}; separate it from `\\` before it")),
            ("echo ${{ v }}", format!("placeholder `{{{{ v }}}}` {word}; separate it from `$` before it")),
            ("echo /sys/{{ v }}/x", format!("placeholder `{{{{ v }}}}` {word}; separate it from `/sys/` before it")),
            (
                "echo {{ v }}{{ w }}",
                format!("placeholder `{{{{ w }}}}` {word}; separate it from `{{{{ v }}}}` before it"),
            ),
            ("echo {{ v }}\"x\"", format!("placeholder `{{{{ v }}}}` {word}; separate it from `\"x\"` after it")),
            ("echo `cat {{ v }}`", format!("placeholder `{{{{ v }}}}` {word}; use `$(…)` instead of backquotes")),
            (
                "echo {{ list }}/x",
                "placeholder `{{ list }}` is a list of words and must stand alone; separate it from `/x` after it"
                    .to_owned(),
            ),
        ];
        for (src, want) in cases {
            assert_eq!(misplaced(src), [want], "{src}");
        }
    }

    #[test]
    fn allowed_placeholders_keep_a_hostile_value_literal_in_a_real_shell() {
        let hostile = "a'b\"c`id`$(id) ;x";
        for (src, want) in [
            ("printf %s {{ v }}", hostile.to_owned()),
            ("printf %s {{ v }}/ctl", format!("{hostile}/ctl")),
            ("printf %s --n={{ v }}", format!("--n={hostile}")),
            ("p={{ v }}; printf %s \"$p\"", hostile.to_owned()),
            ("printf %s \"$(printf %s {{ v }})\"", hostile.to_owned()),
        ] {
            let t = Template::parse(src).unwrap();
            assert!(t.misplaced(|_| false).is_empty(), "{src}");
            let cmd = t.render(&vars(&[("v", hostile.into())])).unwrap();
            let out = std::process::Command::new("sh").arg("-c").arg(&cmd).output().unwrap();
            assert_eq!(String::from_utf8(out.stdout).unwrap(), want, "{cmd}");
        }
    }
}
