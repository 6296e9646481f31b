//! Command templates of host actions: shell text with `{{ variable }}` placeholders, rendered by
//! minijinja (the workspace's one template engine).
//!
//! Every value substituted into a template is shell-quoted, so that nothing taken from a plan or
//! an inventory can change the meaning of the command on the remote host: the engine's formatter,
//! which every `{{ … }}` output passes through, quotes each value (a list becomes one quoted word
//! per element) and ignores minijinja's "safe" marking. A template is plain output of variables
//! and nothing else — no statements, comments, filters or expressions, so nothing in a template
//! can compute or unquote a value — and a variable without a value is an error (strict undefined).
//! Quoting only protects a value where the shell starts a new word: [`Template::misplaced`] finds
//! the placeholders that are not whole words (inside quotes, after a backslash or `$`, glued to
//! other text).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use minijinja::value::{Value, ValueKind};
use minijinja::{AutoEscape, Environment, ErrorKind, Output, State, UndefinedBehavior};

/// A parsed template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Template {
    name: String,
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

impl TemplateValue {
    fn to_value(&self) -> Value {
        match self {
            TemplateValue::Word(w) => Value::from(w.as_str()),
            TemplateValue::List(items) => Value::from_iter(items.iter().map(String::as_str)),
        }
    }

    fn contains(&self, c: char) -> bool {
        match self {
            TemplateValue::Word(w) => w.contains(c),
            TemplateValue::List(items) => items.iter().any(|w| w.contains(c)),
        }
    }
}

/// Variables available to a template.
pub type Vars = BTreeMap<&'static str, TemplateValue>;

/// A template that does not parse, or does not render.
#[derive(Debug, PartialEq, Eq)]
pub struct TemplateError(pub String);

impl fmt::Display for TemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What an empty list renders as before [`take_empty_lists`] removes it with the space before
/// it. A NUL can be in no shell command, so none comes from a template's text or a value: both
/// are refused.
const EMPTY_LIST: char = '\0';

/// Where the engine's next tag starts in `text`: a `{` followed by `{`, `%` or `#` (as minijinja's
/// lexer finds them), with that second character.
fn next_tag(text: &str) -> Option<(usize, u8)> {
    let bytes = text.as_bytes();
    let mut from = 0;
    while let Some(i) = bytes[from..].iter().position(|&b| b == b'{') {
        let at = from + i;
        match bytes.get(at + 1) {
            Some(&c @ (b'{' | b'%' | b'#')) => return Some((at, c)),
            _ => from = at + 1,
        }
    }
    None
}

/// Whether `name` is what the engine reads as a variable (not a constant such as `none`).
fn is_variable(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !matches!(name, "true" | "false" | "none" | "True" | "False" | "None")
}

/// The engine host commands are rendered with: nothing but variables (no filters, tests or
/// functions), every output shell-quoted by [`shell_words`], undefined variables refused, and the
/// text kept to its last byte (minijinja would otherwise drop a final line break).
fn engine<'s>() -> Environment<'s> {
    let mut env = Environment::empty();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.set_keep_trailing_newline(true);
    env.set_auto_escape_callback(|_| AutoEscape::None);
    env.set_formatter(shell_words);
    env
}

/// The engine's formatter: a word shell-quoted, a list as its words shell-quoted and separated by
/// spaces (an empty one as [`EMPTY_LIST`]). A value marked safe is quoted all the same.
fn shell_words(out: &mut Output, _: &State, value: &Value) -> Result<(), minijinja::Error> {
    let word = |v: &Value| match v.as_str() {
        Some(w) if !w.contains(EMPTY_LIST) => Ok(shell_quote(w)),
        Some(_) => Err(minijinja::Error::new(ErrorKind::InvalidOperation, "a value contains a NUL character")),
        None => Err(minijinja::Error::new(
            ErrorKind::InvalidOperation,
            format!("a {} value cannot be substituted into a command", v.kind()),
        )),
    };
    let text = match value.kind() {
        ValueKind::Seq => {
            let words = value.try_iter()?.map(|v| word(&v)).collect::<Result<Vec<_>, _>>()?;
            if words.is_empty() { EMPTY_LIST.to_string() } else { words.join(" ") }
        }
        _ => word(value)?,
    };
    out.write_str(&text).map_err(|_| minijinja::Error::from(ErrorKind::WriteFailure))
}

/// The rendered command without the marks of empty lists, each of which also takes the space
/// before it, so that no double space is left.
fn take_empty_lists(marked: &str) -> String {
    let mut out = String::with_capacity(marked.len());
    for c in marked.chars() {
        if c == EMPTY_LIST {
            if out.ends_with(' ') {
                out.pop();
            }
        } else {
            out.push(c);
        }
    }
    out
}

impl Template {
    /// Parse the template `source`, called `name` in messages. Only `{{ variable }}`
    /// placeholders are allowed: anything else the engine would read as template syntax (`{%`,
    /// `{#`, a filter or an expression) is refused.
    pub fn parse(name: &str, source: &str) -> Result<Template, TemplateError> {
        if source.contains(EMPTY_LIST) {
            return Err(TemplateError("a template cannot contain a NUL character".into()));
        }
        let mut parts = Vec::new();
        let mut rest = source;
        while let Some((start, tag)) = next_tag(rest) {
            if tag != b'{' {
                let what = if tag == b'%' { "a template statement" } else { "a template comment" };
                let at: String = rest[start..].chars().take_while(|&c| c != '\n').take(40).collect();
                return Err(TemplateError(format!(
                    "`{}` opens {what}, which command templates do not have (only `{{{{ variable }}}}` \
                     placeholders) at `{at}`",
                    &rest[start..start + 2]
                )));
            }
            if start > 0 {
                parts.push(Part::Text(rest[..start].to_string()));
            }
            let after = &rest[start + 2..];
            let end = after
                .find("}}")
                .ok_or_else(|| TemplateError(format!("unclosed `{{{{` in template at `{}`", &rest[start..])))?;
            let var = after[..end].trim();
            if !is_variable(var) {
                return Err(TemplateError(format!(
                    "`{{{{{}}}}}` is not a valid placeholder (it names one variable: no filters, expressions \
                     or whitespace control)",
                    &after[..end]
                )));
            }
            parts.push(Part::Var(var.to_string()));
            rest = &after[end + 2..];
        }
        if !rest.is_empty() {
            parts.push(Part::Text(rest.to_string()));
        }
        let t = Template { name: name.to_string(), source: source.to_string(), parts };
        // The engine reads the same variables out of the text, and nothing else.
        let env = engine();
        let compiled = env.template_from_named_str(name, source).map_err(|e| TemplateError(engine_message(&e)))?;
        let ours: BTreeSet<String> = t.variables().map(str::to_owned).collect();
        let theirs: BTreeSet<String> = compiled.undeclared_variables(false).into_iter().collect();
        if ours != theirs {
            return Err(TemplateError(format!("the template engine reads the variables {theirs:?}, not {ours:?}")));
        }
        Ok(t)
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
        let fail = |what: String| TemplateError(format!("template `{}`: {what}", self.name));
        if let Some(var) = self.variables().find(|v| vars.get(v).is_some_and(|v| v.contains(EMPTY_LIST))) {
            return Err(fail(format!("the value of `{var}` contains a NUL character")));
        }
        let ctx = Value::from_iter(vars.iter().map(|(k, v)| (*k, v.to_value())));
        match engine().render_named_str(&self.name, &self.source, ctx) {
            Ok(marked) => Ok(take_empty_lists(&marked)),
            // Strict undefined: the first variable without a value stops the rendering.
            Err(e) if e.kind() == ErrorKind::UndefinedError => {
                let var = self.variables().find(|v| !vars.contains_key(v)).unwrap_or_default();
                Err(fail(format!("no value for `{var}`")))
            }
            Err(e) => Err(fail(engine_message(&e))),
        }
    }
}

/// An engine error without the location minijinja appends (templates are one command; the caller
/// names the template).
fn engine_message(e: &minijinja::Error) -> String {
    match e.detail() {
        Some(d) => format!("{}: {d}", e.kind()),
        None => e.kind().to_string(),
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
        let t = Template::parse("t", "xbflash2 program --spi --image {{ image }} -d {{bdf}}").unwrap();
        assert_eq!(t.variables().collect::<Vec<_>>(), ["image", "bdf"]);
        let v = vars(&[("image", "/opt/bit streams/fwd.mcs".into()), ("bdf", "0000:d8:00.0".into())]);
        assert_eq!(t.render(&v).unwrap(), "xbflash2 program --spi --image '/opt/bit streams/fwd.mcs' -d 0000:d8:00.0");
    }

    #[test]
    fn lists_expand_to_quoted_words() {
        let t = Template::parse("t", "for d in {{ devs }}; do echo 1 > /sys/bus/pci/devices/$d/remove; done").unwrap();
        let v = vars(&[("devs", TemplateValue::List(vec!["0000:d8:00.0".into(), "a b".into()]))]);
        assert_eq!(
            t.render(&v).unwrap(),
            "for d in 0000:d8:00.0 'a b'; do echo 1 > /sys/bus/pci/devices/$d/remove; done"
        );
        let t = Template::parse("t", "agent capture {{ extra }} -- {{ eal }}").unwrap();
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
        let t = Template::parse("t", "echo ${HOME} {x}").unwrap();
        assert_eq!(t.variables().count(), 0);
        assert_eq!(t.render(&Vars::new()).unwrap(), "echo ${HOME} {x}");
    }

    #[test]
    fn malformed_placeholders_are_errors() {
        let err = |src: &str| Template::parse("t", src).unwrap_err().0;
        assert_eq!(err("a {{ b"), "unclosed `{{` in template at `{{ b`");
        let not_one_variable = "is not a valid placeholder (it names one variable: no filters, expressions or \
                                whitespace control)";
        assert_eq!(err("a {{ b c }}"), format!("`{{{{ b c }}}}` {not_one_variable}"));
        assert_eq!(err("a {{}}"), format!("`{{{{}}}}` {not_one_variable}"));
        let t = Template::parse("t", "{{ missing }}").unwrap();
        assert_eq!(t.render(&Vars::new()).unwrap_err().0, "template `t`: no value for `missing`");
    }

    /// Nothing but plain variable output: whatever else minijinja would read as template syntax
    /// could compute a value or take it around the quoting (`|safe`), so it is refused.
    #[test]
    fn template_syntax_beyond_plain_variables_is_refused() {
        for (src, want) in [
            ("{{ v|safe }}", "`{{ v|safe }}` is not a valid placeholder"),
            ("{{ v | upper }}", "`{{ v | upper }}` is not a valid placeholder"),
            ("a {{- v }}", "`{{- v }}` is not a valid placeholder"),
            ("{{ v -}} b", "`{{ v -}}` is not a valid placeholder"),
            ("{{ v.x }}", "`{{ v.x }}` is not a valid placeholder"),
            ("{{ v[0] }}", "`{{ v[0] }}` is not a valid placeholder"),
            ("{{ v ~ w }}", "`{{ v ~ w }}` is not a valid placeholder"),
            ("{{ 'x' }}", "`{{ 'x' }}` is not a valid placeholder"),
            ("{{ 1 }}", "`{{ 1 }}` is not a valid placeholder"),
            ("{{ none }}", "`{{ none }}` is not a valid placeholder"),
            ("{{ range(3) }}", "`{{ range(3) }}` is not a valid placeholder"),
            (
                "x {% if v %}{{ v }}{% endif %}",
                "`{%` opens a template statement, which command templates do not have (only `{{ variable }}` \
                 placeholders) at `{% if v %}{{ v }}{% endif %}`",
            ),
            ("{% raw %}{{ v }}{% endraw %}", "`{%` opens a template statement"),
            (
                "n=${#v} {{ v }}",
                "`{#` opens a template comment, which command templates do not have (only `{{ variable }}` \
                 placeholders) at `{#v} {{ v }}`",
            ),
        ] {
            let e = Template::parse("t", src).unwrap_err().0;
            assert!(e.starts_with(want), "{src}: {e}");
        }
        assert_eq!(Template::parse("t", "echo \0 {{ v }}").unwrap_err().0, "a template cannot contain a NUL character");
    }

    /// The engine's formatter quotes a value however it is marked; an inventory cannot reach it
    /// with anything but a plain variable, and no filter or function exists to call.
    #[test]
    fn the_engine_quotes_even_safe_values_and_has_nothing_to_call() {
        let env = engine();
        let safe = Value::from_safe_string("$(id) x".into());
        let ctx = Value::from_iter([("v", safe), ("l", Value::from_iter(["a b", "c"]))]);
        assert_eq!(env.render_str("{{ v }} {{ v|safe }} {{ l }}", &ctx).unwrap_err().kind(), ErrorKind::UnknownFilter);
        assert_eq!(env.render_str("{{ v }} {{ l }}", &ctx).unwrap(), "'$(id) x' 'a b' c");
        assert_eq!(env.render_str("{{ range(2) }}", &ctx).unwrap_err().kind(), ErrorKind::UnknownFunction);
        assert_eq!(env.render_str("{{ x }}", &ctx).unwrap_err().kind(), ErrorKind::UndefinedError);
        assert_eq!(env.render_str("{{ 3 }}", &ctx).unwrap_err().kind(), ErrorKind::InvalidOperation);
    }

    #[test]
    fn values_with_a_nul_are_refused_and_the_text_is_kept_to_its_last_byte() {
        let t = Template::parse("t", "echo {{ v }}\n").unwrap();
        assert_eq!(t.render(&vars(&[("v", "a".into())])).unwrap(), "echo a\n");
        let nul = TemplateValue::List(vec!["a".into(), "b\0".into()]);
        assert_eq!(
            t.render(&vars(&[("v", nul)])).unwrap_err().0,
            "template `t`: the value of `v` contains a NUL character"
        );
    }

    /// The rendering the engine replaced, kept as the reference every template renders like.
    fn reference_render(t: &Template, vars: &Vars) -> String {
        let mut out = String::new();
        for p in &t.parts {
            match p {
                Part::Text(text) => out.push_str(text),
                Part::Var(name) => match &vars[name.as_str()] {
                    TemplateValue::Word(w) => out.push_str(&shell_quote(w)),
                    TemplateValue::List(items) if items.is_empty() => {
                        if out.ends_with(' ') {
                            out.pop();
                        }
                    }
                    TemplateValue::List(items) => {
                        out.push_str(&items.iter().map(|i| shell_quote(i)).collect::<Vec<_>>().join(" "))
                    }
                },
            }
        }
        out
    }

    proptest::proptest! {
        /// Any text with placeholders, any values: the engine renders what the hand-made
        /// substitution did, byte for byte (lists empty or not, spaces before them or not).
        #[test]
        fn the_engine_renders_like_the_reference(
            pieces in proptest::collection::vec(("[ a{}$'\"\\\\\n%#-]{0,4}", 0usize..4), 0..8),
            words in proptest::collection::vec(proptest::collection::vec("[ a'$`{}\n-]{0,3}", 0..3), 4),
        ) {
            let names = ["w", "x", "l", "m"];
            let mut src = String::new();
            for (text, var) in &pieces {
                src.push_str(text);
                src.push_str(&format!("{{{{ {} }}}}", names[*var]));
            }
            let t = match Template::parse("t", &src) {
                Ok(t) => t,
                // Only text with a `{` can run into template syntax (`{%`, `{#`, `{{{ w }}`).
                Err(e) => {
                    proptest::prop_assert!(pieces.iter().any(|(text, _)| text.contains('{')), "{src:?}: {e}");
                    return Ok(());
                }
            };
            let vars = vars(&[
                ("w", TemplateValue::Word(words[0].concat())),
                ("x", TemplateValue::Word(words[1].concat())),
                ("l", TemplateValue::List(words[2].clone())),
                ("m", TemplateValue::List(words[3].clone())),
            ]);
            proptest::prop_assert_eq!(t.render(&vars).unwrap(), reference_render(&t, &vars));
        }
    }

    fn misplaced(src: &str) -> Vec<String> {
        Template::parse("t", src).unwrap().misplaced(|v| v == "list").into_iter().map(|m| m.message).collect()
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
            let t = Template::parse("t", src).unwrap();
            assert!(t.misplaced(|_| false).is_empty(), "{src}");
            let cmd = t.render(&vars(&[("v", hostile.into())])).unwrap();
            let out = std::process::Command::new("sh").arg("-c").arg(&cmd).output().unwrap();
            assert_eq!(String::from_utf8(out.stdout).unwrap(), want, "{cmd}");
        }
    }
}
