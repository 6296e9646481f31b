//! A plan narrowed to some of its programs, with another number of sessions (the study `nightly`
//! runs to confirm a night that regressed), or with another build of a program (a step of
//! `bisect`). The text is the plan's own, edited where its tree says (the other programs' entries
//! removed, `protocol.sessions` or a program's `bitstream` replaced), so that its comments,
//! relative paths and every other setting stay as they were.

use std::path::Path;

use crate::yaml::{self, Node, Value};

/// `source` (the plan at `path`) with only the programs named in `keep`, in their order, and
/// `sessions` sessions where given. An error says why the text cannot be narrowed.
pub fn subset(path: &Path, source: &str, keep: &[&str], sessions: Option<u32>) -> Result<String, String> {
    let root = yaml::parse(path, source).map_err(|d| d.to_string())?;
    let Value::Map(entries) = &root.value else { return Err(format!("{}: not a mapping", path.display())) };
    let lines: Vec<&str> = source.split_inclusive('\n').collect();
    let entry = |key: &str| entries.iter().position(|(_, k, _)| k == key);
    let mut drop = vec![false; lines.len()];
    let at = |n: &Node| format!("{}:{}", path.display(), n.pos);

    let Some(p) = entry("programs") else { return Err(format!("{}: no `programs`", path.display())) };
    let Value::Seq(items) = &entries[p].2.value else {
        return Err(format!("{}: `programs` is not a list", at(&entries[p].2)));
    };
    // A program's lines: from its `- ` line to the next program's, or to the next top-level key.
    let end_of_list = entries
        .iter()
        .map(|(pos, _, _)| pos.line)
        .filter(|&l| l > entries[p].0.line)
        .min()
        .map_or(lines.len() + 1, |l| l as usize);
    let mut kept = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let name = match &item.value {
            Value::Map(m) => m.iter().find(|(_, k, _)| k == "name").and_then(|(_, _, v)| match &v.value {
                Value::Str(s) => Some(s.as_str()),
                _ => None,
            }),
            _ => None,
        };
        let Some(name) = name else { return Err(format!("{}: a program without a `name`", at(item))) };
        let start = item.pos.line as usize;
        if !lines.get(start - 1).is_some_and(|l| l.trim_start().starts_with('-')) {
            return Err(format!("{}: program `{name}` does not start on its `-` line", at(item)));
        }
        let end = items.get(i + 1).map_or(end_of_list, |next| next.pos.line as usize);
        if keep.contains(&name) {
            kept.push(name);
        } else {
            drop[start - 1..end - 1].iter_mut().for_each(|d| *d = true);
        }
    }
    if let Some(missing) = keep.iter().find(|k| !kept.contains(k)) {
        return Err(format!("{}: no program `{missing}`", path.display()));
    }
    let mut out: Vec<String> = lines.iter().map(|l| (*l).to_string()).collect();
    if let Some(n) = sessions {
        let protocol = entry("protocol").map(|i| &entries[i].2);
        let node = protocol.and_then(|p| match &p.value {
            Value::Map(m) => m.iter().find(|(_, k, _)| k == "sessions").map(|(_, _, v)| v),
            _ => None,
        });
        let Some(node) = node.filter(|n| matches!(n.value, Value::Int(_))) else {
            return Err(format!("{}: no `protocol.sessions` number to replace", path.display()));
        };
        let line = &mut out[node.pos.line as usize - 1];
        let from = line.char_indices().nth(node.pos.col as usize - 1).map_or(line.len(), |(b, _)| b);
        let len = line[from..].find(|c: char| !c.is_ascii_digit()).unwrap_or(line.len() - from);
        line.replace_range(from..from + len, &n.to_string());
    }
    Ok(out.into_iter().zip(drop).filter(|(_, d)| !d).map(|(l, _)| l).collect())
}

/// `source` (the plan at `path`) with program `program`'s `bitstream` set to `manifest` (written
/// as an absolute path, so that it holds wherever the plan is).
pub fn with_bitstream(path: &Path, source: &str, program: &str, manifest: &Path) -> Result<String, String> {
    let root = yaml::parse(path, source).map_err(|d| d.to_string())?;
    let entries = match &root.value {
        Value::Map(entries) => entries,
        _ => return Err(format!("{}: not a mapping", path.display())),
    };
    let items = entries.iter().find(|(_, k, _)| k == "programs").and_then(|(_, _, v)| match &v.value {
        Value::Seq(items) => Some(items),
        _ => None,
    });
    let field = |item: &Node, key: &str| match &item.value {
        Value::Map(m) => m.iter().find(|(_, k, _)| k == key).map(|(_, _, v)| v.clone()),
        _ => None,
    };
    let named =
        |item: &&Node| matches!(field(item, "name"), Some(Node { value: Value::Str(ref s), .. }) if s == program);
    let Some(item) = items.and_then(|items| items.iter().find(named)) else {
        return Err(format!("{}: no program `{program}`", path.display()));
    };
    let Some(node) = field(item, "bitstream").filter(|n| matches!(n.value, Value::Str(_))) else {
        return Err(format!(
            "{}:{}: program `{program}` has no single `bitstream` (it lists one per board, or none): give it one to bisect",
            path.display(),
            item.pos
        ));
    };
    let absolute = std::path::absolute(manifest).map_err(|e| format!("{}: {e}", manifest.display()))?;
    let quoted = serde_json::to_string(&absolute.display().to_string()).map_err(|e| e.to_string())?;
    let mut lines: Vec<String> = source.split_inclusive('\n').map(str::to_string).collect();
    let line = &mut lines[node.pos.line as usize - 1];
    let from = line.char_indices().nth(node.pos.col as usize - 1).map_or(line.len(), |(b, _)| b);
    let len = scalar_len(&line[from..]);
    line.replace_range(from..from + len, &quoted);
    Ok(lines.concat())
}

/// The length of the YAML scalar at the start of `text`: a quoted one to its closing quote, a
/// plain one to the first `,`, `}`, `]`, ` #` or the end of the line.
fn scalar_len(text: &str) -> usize {
    let mut chars = text.char_indices();
    match chars.next() {
        Some((_, q @ ('"' | '\''))) => {
            let mut escaped = false;
            for (i, c) in chars {
                match c {
                    '\\' if q == '"' && !escaped => escaped = true,
                    c if c == q && !escaped => return i + 1,
                    _ => escaped = false,
                }
            }
            text.trim_end_matches('\n').len()
        }
        _ => {
            let end = text.find([',', '}', ']', '\n']).unwrap_or(text.len());
            let end = text[..end].find(" #").unwrap_or(end);
            text[..end].trim_end().len()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAN: &str = "study: s\n# the protocol\nprotocol: { sessions: 1, runs: 5, seed: 3 }\n\
        programs:\n  # first\n  - name: forward\n    bitstream: ../b/f.yaml\n    trace: t\n\
        \x20 - { name: five_tuple, bitstream: ../b/5.yaml, trace: t }\n  - name: checksum\n    trace: t\n\
        \n# after\nanalysis: { calibration: none }\n";

    #[test]
    fn a_plan_keeps_the_programs_named_and_everything_else() {
        let out = subset(Path::new("p.yaml"), PLAN, &["five_tuple", "checksum"], Some(2)).unwrap();
        assert_eq!(
            out,
            "study: s\n# the protocol\nprotocol: { sessions: 2, runs: 5, seed: 3 }\nprograms:\n  # first\n\
             \x20 - { name: five_tuple, bitstream: ../b/5.yaml, trace: t }\n  - name: checksum\n    trace: t\n\
             \n# after\nanalysis: { calibration: none }\n"
        );
        let out = subset(Path::new("p.yaml"), PLAN, &["forward"], None).unwrap();
        assert_eq!(
            out,
            "study: s\n# the protocol\nprotocol: { sessions: 1, runs: 5, seed: 3 }\nprograms:\n  # first\n  - name: forward\n    bitstream: ../b/f.yaml\n    trace: t\n\
             analysis: { calibration: none }\n"
        );
        let block = PLAN
            .replace("protocol: { sessions: 1, runs: 5, seed: 3 }", "protocol:\n  sessions: 12  # twelve\n  runs: 5");
        let out = subset(Path::new("p.yaml"), &block, &["checksum"], Some(3)).unwrap();
        assert!(out.contains("  sessions: 3  # twelve\n") && !out.contains("forward"), "{out}");
    }

    #[test]
    fn what_cannot_be_narrowed_is_said() {
        let err = subset(Path::new("p.yaml"), PLAN, &["checksum", "rmvhdr"], None).unwrap_err();
        assert_eq!(err, "p.yaml: no program `rmvhdr`");
        let err = subset(Path::new("p.yaml"), "study: s\n", &["x"], None).unwrap_err();
        assert_eq!(err, "p.yaml: no `programs`");
        let err = subset(Path::new("p.yaml"), &PLAN.replace("sessions: 1, ", ""), &["forward"], Some(2)).unwrap_err();
        assert!(err.contains("no `protocol.sessions`"), "{err}");
    }

    #[test]
    fn a_program_takes_another_build() {
        let out = with_bitstream(Path::new("p.yaml"), PLAN, "five_tuple", Path::new("/b/5-v2.yaml")).unwrap();
        assert!(out.contains("  - { name: five_tuple, bitstream: \"/b/5-v2.yaml\", trace: t }\n"), "{out}");
        let out = with_bitstream(Path::new("p.yaml"), PLAN, "forward", Path::new("/b/f 2.yaml")).unwrap();
        assert!(out.contains("    bitstream: \"/b/f 2.yaml\"\n"), "{out}");
        let quoted = PLAN.replace("bitstream: ../b/f.yaml", "bitstream: \"../b/f.yaml\"  # the build");
        let out = with_bitstream(Path::new("p.yaml"), &quoted, "forward", Path::new("/v3.yaml")).unwrap();
        assert!(out.contains("    bitstream: \"/v3.yaml\"  # the build\n"), "{out}");
        let err = with_bitstream(Path::new("p.yaml"), PLAN, "checksum", Path::new("/x.yaml")).unwrap_err();
        assert!(err.contains("program `checksum` has no single `bitstream`"), "{err}");
    }
}
