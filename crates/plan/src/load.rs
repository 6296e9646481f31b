//! Loading: a plan with the inventory it names, or any file `orchestrate validate` takes (a plan,
//! an inventory, a bitstream manifest), read, decoded and checked against each other, every
//! problem reported at once.

use std::path::{Path, PathBuf};

use crate::bitstream::{self, Bitstream};
use crate::digest;
use crate::inventory::{self, Inventory};
use crate::model::{Plan, TestbedRef, decode_plan};
use crate::testbed_checks::{check_board, check_ports, check_reflect, check_sender, check_soak, check_timing};
use crate::yaml::{Diagnostic, Node, Value, decode_parsed, load_file, read_file};

/// Errors found while loading a plan, all of them.
#[derive(Debug)]
pub struct Invalid(pub Vec<Diagnostic>);

/// Load and validate a plan file and every file it references. `testbed` overrides the plan's.
pub fn load(path: &Path, testbed: Option<&str>) -> Result<(Plan, Option<Inventory>), Invalid> {
    let mut diags = Vec::new();
    let plan = read_file(path, &mut diags).and_then(|(source, root)| plan_from(path, source, &root, &mut diags));
    with_inventory(plan, testbed, diags)
}

/// A validated YAML file of any kind `orchestrate validate` takes.
#[derive(Debug)]
pub enum Document {
    /// A study plan, with the inventory it names (none on the simulated testbed).
    Plan(Box<Plan>, Option<Box<Inventory>>),
    /// A testbed inventory.
    Inventory(Box<Inventory>),
    /// A bitstream manifest.
    Bitstream(Box<Bitstream>),
}

impl Document {
    /// What the file is, for `validate`'s `FILE: ok (…)` line.
    pub fn summary(&self) -> String {
        let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
        match self {
            Document::Plan(p, _) => format!("study `{}`, {}", p.study, plural(p.programs.len(), "program")),
            Document::Inventory(inv) => {
                let own = inv
                    .actions
                    .iter()
                    .filter(|(a, t)| t.source() != a.default_template(inv.shell, &inv.flash_methods))
                    .count();
                format!(
                    "inventory `{}`, {}, {} overridden",
                    inv.name,
                    plural(inv.receiver.fpga_pci.len(), "FPGA function"),
                    plural(own, "action")
                )
            }
            Document::Bitstream(b) => format!(
                "bitstream manifest `{}`, {}{}, image {}",
                b.name,
                if b.null { "null image, " } else { "" },
                match b.programming {
                    bitstream::Programming::Qspi => "qspi",
                    bitstream::Programming::Jtag => "jtag",
                },
                if b.present { "present, sha256 verified" } else { "not present" }
            ),
        }
    }
}

/// Load and validate a plan, an inventory or a bitstream manifest, told apart by their top-level
/// keys (a plan's `study`/`programs`, an inventory's `sender`/`receiver`, a manifest's
/// `board`/`programming`); a file with none of them is read as a plan.
pub fn load_any(path: &Path) -> Result<Document, Invalid> {
    let mut diags = Vec::new();
    let Some((source, root)) = read_file(path, &mut diags) else { return Err(Invalid(diags)) };
    let has = |keys: &[&str]| match &root.value {
        Value::Map(entries) => entries.iter().any(|(_, k, _)| keys.contains(&k.as_str())),
        _ => false,
    };
    let decoded = if has(&["study", "programs", "protocol", "traces", "testbed"]) {
        None
    } else if has(&["sender", "receiver"]) {
        Some(decode_parsed(path, &root, &mut diags, inventory::decode).map(|i| Document::Inventory(Box::new(i))))
    } else if has(&["board", "programming", "clock_mhz", "vendor_bound_cycles"]) {
        Some(decode_parsed(path, &root, &mut diags, bitstream::decode).map(|b| Document::Bitstream(Box::new(b))))
    } else {
        None
    };
    match decoded {
        None => {
            let plan = plan_from(path, source, &root, &mut diags);
            with_inventory(plan, None, diags).map(|(p, i)| Document::Plan(Box::new(p), i.map(Box::new)))
        }
        Some(doc) => {
            diags.sort();
            diags.dedup();
            doc.filter(|_| diags.is_empty()).ok_or(Invalid(diags))
        }
    }
}

/// The plan's inventory loaded and checked against it; every problem found, sorted.
fn with_inventory(
    plan: Option<Plan>,
    testbed: Option<&str>,
    mut diags: Vec<Diagnostic>,
) -> Result<(Plan, Option<Inventory>), Invalid> {
    let inventory = plan.as_ref().and_then(|p| {
        let tb = match testbed {
            Some("sim") => TestbedRef::Sim,
            Some(other) => TestbedRef::Inventory(PathBuf::from(other)),
            None => p.testbed.clone(),
        };
        match tb {
            TestbedRef::Sim => None,
            TestbedRef::Inventory(inv) => load_file(&inv, &mut diags, inventory::decode),
        }
    });
    // Each program's build for the testbed's board and shell, where the plan names several.
    let mut plan = plan;
    if let (Some(p), Some(inv)) = (&mut plan, &inventory) {
        for prog in &mut p.programs {
            prog.for_testbed(inv.board, inv.shell);
        }
    }
    if let (Some(p), Some(inv)) = (&plan, &inventory) {
        check_reflect(p, inv, &mut diags);
        check_timing(p, inv, &mut diags);
        check_soak(p, inv, &mut diags);
        check_sender(p, inv, &mut diags);
        check_ports(p, inv, &mut diags);
        check_board(p, inv, &mut diags);
    }
    diags.sort();
    diags.dedup();
    match plan {
        Some(p) if diags.is_empty() => Ok((p, inventory)),
        _ => Err(Invalid(diags)),
    }
}

/// Decode a parsed plan file; its hash is the sha256 of its text.
fn plan_from(path: &Path, source: String, root: &Node, diags: &mut Vec<Diagnostic>) -> Option<Plan> {
    let hash = digest::sha256_hex(source.as_bytes());
    decode_parsed(path, root, diags, |d, root| decode_plan(d, root, source, hash))
}
