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
    let mut lines: Vec<String> = source.split_inclusive('\n').map(str::to_string).collect();
    let mut drop = vec![false; lines.len()];
    let at = |n: &Node| format!("{}:{}", path.display(), n.pos);

    let Some((key_pos, _, programs)) = entries.iter().find(|(_, k, _)| k == "programs") else {
        return Err(format!("{}: no `programs`", path.display()));
    };
    let Value::Seq(items) = &programs.value else { return Err(format!("{}: `programs` is not a list", at(programs))) };
    // A program's lines: from its `- ` line to the next program's, or to the next top-level key.
    let end_of_list = entries
        .iter()
        .map(|(pos, _, _)| pos.line)
        .filter(|&l| l > key_pos.line)
        .min()
        .map_or(lines.len() + 1, |l| l as usize);
    let mut kept = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let Some(name) = field(item, "name").and_then(text) else {
            return Err(format!("{}: a program without a `name`", at(item)));
        };
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
    if let Some(n) = sessions {
        let protocol = entries.iter().find(|(_, k, _)| k == "protocol").map(|(_, _, v)| v);
        let Some(node) = protocol.and_then(|p| field(p, "sessions")).filter(|n| matches!(n.value, Value::Int(_)))
        else {
            return Err(format!("{}: no `protocol.sessions` number to replace", path.display()));
        };
        replace_scalar(&mut lines, node, &n.to_string());
    }
    Ok(lines.into_iter().zip(drop).filter(|(_, d)| !d).map(|(l, _)| l).collect())
}

/// `source` (the plan at `path`) with program `program`'s `bitstream` set to `manifest` (written
/// as an absolute path, so that it holds wherever the plan is).
pub fn with_bitstream(path: &Path, source: &str, program: &str, manifest: &Path) -> Result<String, String> {
    let root = yaml::parse(path, source).map_err(|d| d.to_string())?;
    let items = match field(&root, "programs").map(|n| &n.value) {
        Some(Value::Seq(items)) => items.as_slice(),
        _ => &[],
    };
    let Some(item) = items.iter().find(|item| field(item, "name").and_then(text) == Some(program)) else {
        return Err(format!("{}: no program `{program}`", path.display()));
    };
    let Some(node) = field(item, "bitstream").filter(|n| text(n).is_some()) else {
        return Err(format!(
            "{}:{}: program `{program}` has no single `bitstream` (it lists one per board, or none): give it one to bisect",
            path.display(),
            item.pos
        ));
    };
    let absolute = std::path::absolute(manifest).map_err(|e| format!("{}: {e}", manifest.display()))?;
    let quoted = serde_json::to_string(&absolute.display().to_string()).map_err(|e| e.to_string())?;
    let mut lines: Vec<String> = source.split_inclusive('\n').map(str::to_string).collect();
    replace_scalar(&mut lines, node, &quoted);
    Ok(lines.concat())
}

/// The value of `key` in mapping `node`.
fn field<'a>(node: &'a Node, key: &str) -> Option<&'a Node> {
    match &node.value {
        Value::Map(m) => m.iter().find(|(_, k, _)| k == key).map(|(_, _, v)| v),
        _ => None,
    }
}

/// The string `node` holds.
fn text(node: &Node) -> Option<&str> {
    match &node.value {
        Value::Str(s) => Some(s),
        _ => None,
    }
}

/// The scalar `node` replaced by `with` in the source's `lines`.
fn replace_scalar(lines: &mut [String], node: &Node, with: &str) {
    let line = &mut lines[node.pos.line as usize - 1];
    let from = line.char_indices().nth(node.pos.col as usize - 1).map_or(line.len(), |(b, _)| b);
    let len = scalar_len(&line[from..]);
    line.replace_range(from..from + len, with);
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
