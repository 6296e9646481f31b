//! The JSON Schemas under `schemas/`: generated from the decoders, named by every shipped YAML
//! file, and read by an independent validator (check-jsonschema) that must agree with
//! `orchestrate validate` on the shipped files and on mistakes made in copies of them.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{orchestrate, stderr, test_python, tmp_dir};

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Folder of shipped files → the schema they follow.
const SHIPPED: [(&str, &str); 3] =
    [("plans", "plan.schema.json"), ("testbeds", "inventory.schema.json"), ("bitstreams", "bitstream.schema.json")];

fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
}

/// check-jsonschema's verdict on `files` against `schema`, with its report.
fn independent(python: &Path, schema: &Path, files: &[PathBuf]) -> (bool, String) {
    let o = Command::new(python)
        .args(["-m", "check_jsonschema", "--schemafile"])
        .arg(schema)
        .args(files)
        .output()
        .expect("run check-jsonschema");
    (o.status.success(), format!("{}{}", String::from_utf8_lossy(&o.stdout), stderr(&o)))
}

#[test]
fn the_committed_schemas_are_the_generated_ones() {
    let out = tmp_dir("schemas");
    let o = orchestrate(&["schema", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut committed: Vec<String> = std::fs::read_dir(root().join("schemas"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    committed.sort();
    assert_eq!(committed, ["bitstream.schema.json", "inventory.schema.json", "plan.schema.json"]);
    for name in &committed {
        let generated = std::fs::read_to_string(out.join(name)).unwrap();
        let kept = std::fs::read_to_string(root().join("schemas").join(name)).unwrap();
        assert!(generated == kept, "schemas/{name} differs from what the decoders describe: run `make schemas`");
    }
    // One schema printed alone is the same text.
    let o = orchestrate(&["schema", "plan"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), std::fs::read_to_string(out.join("plan.schema.json")).unwrap());
}

/// Every value of `schema` the walk reaches, with its JSON path.
fn walk<'a>(schema: &'a serde_json::Value, path: String, out: &mut Vec<(String, &'a serde_json::Value)>) {
    out.push((path.clone(), schema));
    let parts = [("properties", true), ("items", false), ("additionalProperties", false)];
    for (key, named) in parts {
        match schema.get(key) {
            Some(serde_json::Value::Object(props)) if named => {
                props.iter().for_each(|(k, v)| walk(v, format!("{path}.{k}"), out));
            }
            Some(v) if v.is_object() && !named => walk(v, format!("{path}[{key}]"), out),
            _ => {}
        }
    }
    for (i, alt) in schema.get("anyOf").and_then(|a| a.as_array()).into_iter().flatten().enumerate() {
        walk(alt, format!("{path}|{i}"), out);
    }
}

#[test]
fn every_key_a_decoder_reads_has_a_type_and_the_plan_keys_are_the_documented_ones() {
    for (_, name) in SHIPPED {
        let text = std::fs::read_to_string(root().join("schemas").join(name)).unwrap();
        let schema: serde_json::Value = serde_json::from_str(&text).unwrap();
        let mut values = Vec::new();
        walk(&schema, "$".into(), &mut values);
        for (path, v) in &values {
            assert!(v.as_object().is_some_and(|o| !o.is_empty()), "{name}: {path} is not described");
        }
    }
    // The plan's sections as README.md lists them; the required ones with no default.
    let plan: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root().join("schemas/plan.schema.json")).unwrap()).unwrap();
    let mut keys: Vec<&str> = plan["properties"].as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "analysis",
            "description",
            "design",
            "factors",
            "order",
            "programs",
            "protocol",
            "regression",
            "report",
            "study",
            "testbed",
            "traces",
            "trend"
        ]
    );
    assert_eq!(plan["required"], serde_json::json!(["study", "testbed", "protocol", "traces", "programs"]));
    assert_eq!(plan["additionalProperties"], false);
    // `sessions`: a count, or adaptive sessions `{min, max, until}`.
    let sessions = &plan["properties"]["protocol"]["properties"]["sessions"]["anyOf"];
    assert_eq!((sessions[1]["type"].as_str(), sessions[1]["minimum"].as_i64()), (Some("integer"), Some(1)));
    assert_eq!(sessions[0]["required"], serde_json::json!(["min", "max", "until"]));
}

#[test]
fn every_shipped_file_names_its_schema_and_an_independent_validator_accepts_it() {
    let Some(python) = test_python() else { return };
    for (dir, schema) in SHIPPED {
        let files = yaml_files(&root().join(dir));
        assert!(!files.is_empty(), "{dir}");
        for f in &files {
            let first = std::fs::read_to_string(f).unwrap().lines().next().unwrap_or_default().to_string();
            assert_eq!(first, format!("# yaml-language-server: $schema=../schemas/{schema}"), "{}", f.display());
        }
        let (ok, report) = independent(&python, &root().join("schemas").join(schema), &files);
        assert!(ok, "{dir}: {report}");
        let o =
            orchestrate(&[&["validate"][..], &files.iter().map(|f| f.to_str().unwrap()).collect::<Vec<_>>()].concat());
        assert!(o.status.success(), "{dir}: {}", stderr(&o));
    }
}

/// A copy of the repository's shipped files in a fresh folder (their relative references intact,
/// the traces and the emulated testbed's state linked), for mistakes to be made in.
fn shipped_copy() -> PathBuf {
    let dir = tmp_dir("schema-mistakes");
    for (sub, _) in SHIPPED {
        std::fs::create_dir(dir.join(sub)).unwrap();
        for f in yaml_files(&root().join(sub)) {
            std::fs::copy(&f, dir.join(sub).join(f.file_name().unwrap())).unwrap();
        }
    }
    std::os::unix::fs::symlink(root().join("traces"), dir.join("traces")).unwrap();
    std::os::unix::fs::symlink(root().join("schemas"), dir.join("schemas")).unwrap();
    dir
}

#[test]
fn the_independent_validator_and_orchestrate_validate_refuse_the_same_mistakes() {
    let Some(python) = test_python() else { return };
    let dir = shipped_copy();
    // (file, text replaced, replacement, what the mistake is)
    let mistakes = [
        ("plans/smoke.yaml", "study: smoke", "study: smoke\nsessions: 2", "a key at the wrong level"),
        ("plans/smoke.yaml", "sessions: 2", "sessions: 0", "out of range"),
        ("plans/smoke.yaml", "runs: 2", "runs: two", "a word for a number"),
        ("plans/smoke.yaml", "seed: 7", "seed: 7\n  flash: sometimes", "not one of the choices"),
        ("plans/smoke.yaml", "  forward_1k:\n", "  1k-forward:\n", "not a safe name"),
        ("plans/smoke.yaml", "probe_id: compact", "probe_id: compact, vlan: 5000", "VLAN id out of range"),
        ("plans/smoke.yaml", "formats: [markdown]", "formats: [pdf]", "a report format that does not exist"),
        ("plans/smoke.yaml", "    trace: checksum_1k\n", "    trace: checksum_1k\n    tabel: x\n", "a misspelt key"),
        ("testbeds/oct-u280.yaml", "rx_ring", "rx_rings", "a misspelt key"),
        ("bitstreams/forward.yaml", "programming: qspi", "programming: usb", "not one of the choices"),
        ("bitstreams/forward.yaml", "clock_mhz: 250", "clock_mhz: 0", "out of range"),
    ];
    for file in ["plans/smoke.yaml", "testbeds/oct-u280.yaml", "bitstreams/forward.yaml"] {
        let o = orchestrate(&["validate", dir.join(file).to_str().unwrap()]);
        assert!(o.status.success(), "the copy of {file}: {}", stderr(&o));
    }
    for (file, from, to, what) in mistakes {
        let path = dir.join(file);
        let original = std::fs::read_to_string(&path).unwrap();
        assert!(original.contains(from), "{file} has no `{from}`");
        std::fs::write(&path, original.replacen(from, to, 1)).unwrap();
        let schema = SHIPPED.iter().find(|(d, _)| file.starts_with(d)).unwrap().1;
        let (ok, report) = independent(&python, &dir.join("schemas").join(schema), std::slice::from_ref(&path));
        assert!(!ok, "{file} with {what}: check-jsonschema accepts it\n{report}");
        let o = orchestrate(&["validate", path.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(2), "{file} with {what}: orchestrate validate accepts it");
        std::fs::write(&path, original).unwrap();
    }
    // The copies themselves pass both.
    for (sub, schema) in SHIPPED {
        let (ok, report) = independent(&python, &dir.join("schemas").join(schema), &yaml_files(&dir.join(sub)));
        assert!(ok, "{sub}: {report}");
    }
}
