//! Shell completions and manual pages, generated from the command line's definition and read by
//! the tools that use them (bash, groff).

use std::process::Command;

use crate::common::{orchestrate, stderr};

#[test]
fn completions_and_manual_pages_come_from_the_cli_definition() {
    // bash: the generated function completes subcommands and options when sourced.
    let o = orchestrate(&["completions", "bash"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let script = crate::common::tmp("completions.bash");
    std::fs::write(&script, &o.stdout).unwrap();
    // As bash calls it: COMP_WORDS and COMP_CWORD set, arguments command, current and previous word.
    let complete = |words: &str, cword: usize| {
        let cmd = format!(
            "source {}; COMP_WORDS=({words}); COMP_CWORD={cword}; \
             _orchestrate orchestrate \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"; \
             printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            script.display()
        );
        let out = Command::new("bash").args(["-c", &cmd]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let subcommands = complete("orchestrate ''", 1);
    for sub in ["run", "validate", "plan", "analyze", "report", "compare", "import", "trace", "completions", "man"] {
        assert!(subcommands.lines().any(|l| l == sub), "{sub} in {subcommands}");
    }
    assert!(complete("orchestrate run --re", 2).lines().any(|l| l == "--resume"));
    std::fs::remove_file(&script).unwrap();
    // zsh and fish: their completion formats.
    let zsh = orchestrate(&["completions", "zsh"]);
    assert!(String::from_utf8_lossy(&zsh.stdout).starts_with("#compdef orchestrate"));
    let fish = orchestrate(&["completions", "fish"]);
    assert!(String::from_utf8_lossy(&fish.stdout).contains("complete -c orchestrate -n"));

    // Manual pages: one per (sub)command, rendered by groff.
    let dir = crate::common::tmp_dir("man");
    let o = orchestrate(&["man", "--out", dir.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    for page in ["orchestrate.1", "orchestrate-run.1", "orchestrate-trace-generate.1", "orchestrate-import.1"] {
        assert!(dir.join(page).is_file(), "{page}");
    }
    let out =
        Command::new("groff").args(["-man", "-Tutf8", "-P-bou"]).arg(dir.join("orchestrate-run.1")).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("--resume") && text.contains("Continue the study"), "{text}");
    std::fs::remove_dir_all(&dir).unwrap();
}
