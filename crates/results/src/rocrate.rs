//! `ro-crate-metadata.json`: the results folder as a Workflow Run RO-Crate (RO-Crate 1.1 with the
//! Process, Workflow and Provenance Run Crate profiles 0.5, researchobject.org), so that archives,
//! workflow registries and `rocrate-validator` read the study's provenance. It is made from the
//! typed provenance and journal, never kept as a second copy: written with the summary and the
//! reports, and again whenever they are.
//!
//! The plan is the workflow (`plan.yaml`, the crate's main entity), `orchestrate` the engine, the
//! study a CreateAction of the plan (inputs: plan, traces, bitstream manifests' checksums, the
//! testbed's facts as PropertyValues; outputs: run files, journal, summary, reports), each session
//! a step of the plan run by the testbed's bring-up and runs (the Provenance Run Crate's
//! HowToStep, ControlAction and CreateAction), all organised by the engine (OrganizeAction).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::ResultsError;
use crate::event::{Entry, Event};
use crate::journal;
use crate::provenance::Provenance;

/// The crate's file name.
pub const FILE: &str = "ro-crate-metadata.json";

/// The profiles the crate conforms to: RO-Crate 1.1's Workflow RO-Crate and the run crates 0.5,
/// as `rocrate-validator` 0.13 checks them.
pub const PROFILES: [&str; 4] = [
    "https://w3id.org/ro/wfrun/process/0.5",
    "https://w3id.org/ro/wfrun/workflow/0.5",
    "https://w3id.org/ro/wfrun/provenance/0.5",
    "https://w3id.org/workflowhub/workflow-ro-crate/1.0",
];

/// Files of a results folder never in its crate: the crate itself and the folder's lock.
const LEFT_OUT: [&str; 2] = [FILE, crate::lock::FILE];

/// The sha256 of files of a folder that the caller has just read whole under the folder's lock
/// (the analysis, of every run file it checked against the journal), by path relative to the
/// folder, `/`-separated: not read again for the crate.
pub type Hashed = BTreeMap<String, String>;

/// Write the folder's crate (atomically, replacing an earlier one); every file not in `hashed` is
/// hashed.
pub fn write(dir: &Path, hashed: &Hashed) -> Result<(), ResultsError> {
    let prov = Provenance::read_file(&dir.join("provenance.json"))?;
    let entries = journal::read(&dir.join("journal.jsonl"))?;
    write_of(dir, &prov, &entries, hashed)
}

/// [`write()`] with the folder's provenance and journal as the caller has just read them (under the
/// folder's lock).
pub fn write_of(dir: &Path, prov: &Provenance, entries: &[Entry], hashed: &Hashed) -> Result<(), ResultsError> {
    let files = files(dir, hashed)?;
    let text = serde_json::to_string_pretty(&metadata(prov, entries, &files)).map_err(|source| ResultsError::Json {
        path: dir.join(FILE),
        what: "RO-Crate metadata".into(),
        source,
    })?;
    crate::write_file(&dir.join(FILE), (text + "\n").as_bytes(), true)
}

/// One file of the folder: its path relative to it, size and sha256.
pub struct FileFacts {
    /// Relative path, `/`-separated.
    pub rel: String,
    /// Bytes.
    pub size: u64,
    /// sha256, hex.
    pub sha256: String,
}

/// Every file of the folder but the crate itself, the lock, hidden files and the runs'
/// reductions (`pairs/`: derived data, made again from the run files), in path order; the files
/// not in `hashed` hashed on every core.
pub fn files(dir: &Path, hashed: &Hashed) -> Result<Vec<FileFacts>, ResultsError> {
    fn walk(root: &Path, d: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
        for e in std::fs::read_dir(d)? {
            let e = e?;
            let t = e.file_type()?;
            if t.is_dir() {
                walk(root, &e.path(), out)?;
            } else if t.is_file() {
                out.push(e.path().strip_prefix(root).unwrap_or(&e.path()).to_path_buf());
            }
        }
        Ok(())
    }
    let mut paths = Vec::new();
    walk(dir, dir, &mut paths).map_err(crate::io_err(dir))?;
    paths.sort();
    paths.retain(|rel| {
        let name = rel.to_string_lossy();
        !(LEFT_OUT.contains(&name.as_ref())
            || rel.starts_with(crate::REDUCTIONS)
            || rel.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.')))
    });
    let facts = |rel: &PathBuf| {
        let path = dir.join(rel);
        let size = std::fs::metadata(&path).map_err(crate::io_err(&path))?.len();
        let rel = rel.to_string_lossy().replace('\\', "/");
        let sha256 = match hashed.get(&rel) {
            Some(sha256) => sha256.clone(),
            None => latency_plan::digest::sha256_file(&path).map_err(crate::io_err(&path))?,
        };
        Ok(FileFacts { rel, size, sha256 })
    };
    crate::par_map(&paths, facts).into_iter().collect()
}

/// A relative path as a crate `@id`: each byte outside RFC 3986's path characters (unreserved,
/// sub-delimiters, `@`, `/`; not `:`, which would read as a scheme) percent-encoded.
fn id(rel: &str) -> String {
    rel.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => (b as char).to_string(),
            b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b';' | b'=' | b'@' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A journal time (ms) as the profiles want it: `YYYY-MM-DDTHH:MM:SS.mmm+00:00`.
fn time_ms(ms: u64) -> String {
    let whole = crate::utc(ms / 1000);
    format!("{}.{:03}+00:00", &whole[..19], ms % 1000)
}

/// A provenance time (RFC 3339, UTC) in the same form.
fn time_of(text: &str) -> Option<String> {
    crate::parse_utc_micros(text).map(|us| time_ms(u64::try_from(us / 1000).unwrap_or(0)))
}

fn encoding(rel: &str) -> &'static str {
    match rel.rsplit('.').next().unwrap_or("") {
        "json" => "application/json",
        "jsonl" => "application/jsonl",
        "yaml" | "yml" => "application/yaml",
        "html" => "text/html",
        "md" => "text/markdown",
        "svg" => "image/svg+xml",
        "parquet" => "application/vnd.apache.parquet",
        "pcap" => "application/vnd.tcpdump.pcap",
        "log" | "txt" => "text/plain",
        _ => "application/octet-stream",
    }
}

/// The crate of a study with provenance `prov`, journal `entries` and `files`.
pub fn metadata(prov: &Provenance, entries: &[Entry], files: &[FileFacts]) -> Value {
    let mut graph: Vec<Value> = Vec::new();
    // The workflow: the plan; for data imported from another tool, the description of the
    // procedure that measured them (`import.md`, written by the import).
    let imported = prov.import.is_some() && !files.iter().any(|f| f.rel == "plan.yaml");
    let (workflow, language, language_name) = if imported {
        ("import.md", "#latencylab-procedure", "LatencyLab's published procedure, described")
    } else {
        ("plan.yaml", "#orchestrate-plan", "orchestrate plan (YAML)")
    };
    let ids: Vec<String> = files.iter().map(|f| id(&f.rel)).collect();
    let refs = |v: &[String]| -> Value {
        match v {
            [one] => json!({ "@id": one }),
            _ => Value::Array(v.iter().map(|i| json!({ "@id": i })).collect()),
        }
    };
    // The sessions, from the journal: name, first start and last finish, run files.
    struct Session {
        name: String,
        start: u64,
        end: Option<u64>,
        runs: Vec<String>,
    }
    let mut sessions: BTreeMap<usize, Session> = BTreeMap::new();
    let mut index_of: BTreeMap<(String, u32), usize> = BTreeMap::new();
    for e in entries {
        match &e.event {
            Event::SessionStarted { index, name, .. } => {
                let s = sessions.entry(*index).or_insert(Session {
                    name: name.clone(),
                    start: e.t,
                    end: None,
                    runs: Vec::new(),
                });
                s.start = s.start.min(e.t);
                if let Some((program, n)) =
                    name.rsplit_once("_s").and_then(|(p, n)| Some((p.to_string(), n.parse().ok()?)))
                {
                    index_of.insert((program, n), *index);
                }
            }
            Event::SessionFinished { index } => {
                if let Some(s) = sessions.get_mut(index) {
                    s.end = Some(e.t);
                }
            }
            Event::RunFinished { program, session, path, .. } => {
                let at = index_of.get(&(program.clone(), *session)).copied();
                if let Some(s) = at.and_then(|i| sessions.get_mut(&i)) {
                    s.runs.push(id(path));
                }
            }
            _ => {}
        }
    }
    let inputs: Vec<String> = files
        .iter()
        .zip(&ids)
        .filter(|(f, _)| f.rel == workflow || f.rel.starts_with("traces/"))
        .map(|(_, i)| i.clone())
        .collect();
    let outputs: Vec<String> = files
        .iter()
        .zip(&ids)
        .filter(|(f, _)| f.rel != workflow && !f.rel.starts_with("traces/"))
        .map(|(_, i)| i.clone())
        .collect();
    let facts: Vec<(String, Value)> = match serde_json::to_value(&prov.testbed.facts) {
        Ok(Value::Object(m)) => m.into_iter().filter(|(_, v)| !v.is_null()).collect(),
        _ => Vec::new(),
    };
    let fact_ids: Vec<String> = facts.iter().map(|(k, _)| format!("#testbed-{k}")).collect();
    let mut run_object: Vec<String> = inputs.clone();
    run_object.extend(fact_ids.iter().cloned());
    run_object.extend(prov.bitstreams.keys().map(|k| format!("#bitstream-{k}")));
    let step_ids: Vec<String> = sessions.values().map(|s| format!("#step-{}", s.name)).collect();
    let control_ids: Vec<String> = sessions.values().map(|s| format!("#control-{}", s.name)).collect();
    let mut mentions = vec!["#run".to_string(), "#organize".to_string()];
    mentions.extend(sessions.values().map(|s| format!("#session-{}", s.name)));
    mentions.extend(control_ids.iter().cloned());
    let ended = prov.ended.as_deref().and_then(time_of);

    graph.push(json!({
        "@id": FILE,
        "@type": "CreativeWork",
        "about": { "@id": "./" },
        "conformsTo": [{ "@id": "https://w3id.org/ro/crate/1.1" }, { "@id": PROFILES[3] }],
    }));
    graph.push(json!({
        "@id": "./",
        "@type": "Dataset",
        "name": format!("Latency study {}", prov.study),
        "description": format!(
            "Results of the latency study `{}` on testbed `{}`, run by orchestrate {}: the plan, its traces, the run data, \
             the journal, the summary and the reports.",
            prov.study, prov.testbed.name, prov.tool_version
        ),
        "license": "not stated: the study's authors give the licence of its data when they publish it",
        "datePublished": ended.clone().or_else(|| time_of(&prov.started)).unwrap_or_default(),
        "conformsTo": PROFILES.iter().map(|p| json!({ "@id": p })).collect::<Vec<_>>(),
        "mainEntity": { "@id": workflow },
        "hasPart": refs(&ids),
        "mentions": refs(&mentions),
    }));
    for p in PROFILES {
        graph.push(json!({ "@id": p, "@type": "CreativeWork", "name": p.rsplit_once("w3id.org/").map_or(p, |x| x.1) }));
    }
    graph.push(json!({
        "@id": "#orchestrate",
        "@type": "SoftwareApplication",
        "name": "orchestrate",
        "version": prov.tool_version,
        "identifier": { "@id": "#orchestrate-commit" },
    }));
    graph.push(json!({
        "@id": "#orchestrate-commit",
        "@type": "PropertyValue",
        "propertyID": "git-commit",
        "value": prov.git_commit,
    }));
    graph.push(json!({ "@id": language, "@type": "ComputerLanguage", "name": language_name }));
    graph.push(json!({
        "@id": "#session",
        "@type": "SoftwareApplication",
        "name": "session: the testbed's bring-up and the runs of a program",
        "version": prov.tool_version,
        "isPartOf": { "@id": "#orchestrate" },
    }));
    let mut plan = json!({
        "@id": workflow,
        "@type": ["File", "SoftwareSourceCode", "ComputationalWorkflow", "HowTo"],
        "name": format!("{} of {}", if imported { "procedure" } else { "plan" }, prov.study),
        "programmingLanguage": { "@id": language },
        "version": prov.plan_hash,
        "hasPart": { "@id": "#session" },
    });
    if !step_ids.is_empty() {
        plan["step"] = refs(&step_ids);
    }
    graph.push(plan);
    for (k, (s, step)) in sessions.values().zip(&step_ids).enumerate() {
        graph.push(json!({
            "@id": step,
            "@type": "HowToStep",
            "name": s.name,
            "position": k.to_string(),
            "workExample": { "@id": "#session" },
        }));
        let mut action = json!({
            "@id": format!("#session-{}", s.name),
            "@type": "CreateAction",
            "name": format!("session {}", s.name),
            "instrument": { "@id": "#session" },
            "startTime": time_ms(s.start),
            "actionStatus": if s.end.is_some() { "http://schema.org/CompletedActionStatus" } else { "http://schema.org/FailedActionStatus" },
        });
        if let Some(end) = s.end {
            action["endTime"] = json!(time_ms(end));
        }
        let runs: Vec<String> = s.runs.iter().filter(|r| ids.contains(r)).cloned().collect();
        if !runs.is_empty() {
            action["result"] = refs(&runs);
        }
        graph.push(action);
        graph.push(json!({
            "@id": format!("#control-{}", s.name),
            "@type": "ControlAction",
            "name": format!("run session {}", s.name),
            "instrument": { "@id": step },
            "object": { "@id": format!("#session-{}", s.name) },
        }));
    }
    let mut organize = json!({
        "@id": "#organize",
        "@type": "OrganizeAction",
        "name": "orchestrate runs the plan's sessions",
        "instrument": { "@id": "#orchestrate" },
        "result": { "@id": "#run" },
        "startTime": time_of(&prov.started),
    });
    if !control_ids.is_empty() {
        organize["object"] = refs(&control_ids);
    }
    graph.push(organize);
    let mut run = json!({
        "@id": "#run",
        "@type": "CreateAction",
        "name": format!("study {}", prov.study),
        "instrument": { "@id": workflow },
        "startTime": time_of(&prov.started),
        "actionStatus": if ended.is_some() { "http://schema.org/CompletedActionStatus" } else { "http://schema.org/ActiveActionStatus" },
        "object": refs(&run_object),
        "result": refs(&outputs),
    });
    if let Some(e) = &ended {
        run["endTime"] = json!(e);
    }
    graph.push(run);
    for ((k, v), fid) in facts.iter().zip(&fact_ids) {
        let value = match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        graph.push(json!({ "@id": fid, "@type": "PropertyValue", "propertyID": k, "name": k, "value": value }));
    }
    for (name, b) in &prov.bitstreams {
        graph.push(json!({
            "@id": format!("#bitstream-{name}"),
            "@type": "PropertyValue",
            "propertyID": "bitstream-sha256",
            "name": format!("bitstream {name} ({})", b.manifest.display()),
            "value": b.sha256,
        }));
    }
    for (f, fid) in files.iter().zip(&ids) {
        graph.push(json!({
            "@id": fid,
            "@type": "File",
            "name": f.rel,
            "encodingFormat": encoding(&f.rel),
            "contentSize": f.size.to_string(),
            "sha256": f.sha256,
        }));
    }
    json!({
        "@context": ["https://w3id.org/ro/crate/1.1/context", { "sha256": "https://w3id.org/ro/terms/workflow-run#sha256" }],
        "@graph": graph,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_times_take_the_forms_the_profiles_check() {
        assert_eq!(id("data/forward_s1/run 1.parquet"), "data/forward_s1/run%201.parquet");
        assert_eq!(id("data/program=forward/a:b#c.parquet"), "data/program=forward/a%3Ab%23c.parquet");
        assert_eq!(time_ms(1_796_220_673_824), "2026-12-02T14:11:13.824+00:00");
        assert_eq!(time_of("2026-12-02T14:10:42.826562Z").as_deref(), Some("2026-12-02T14:10:42.826+00:00"));
    }
}
