//! `--testbed a.yaml,b.yaml`: one plan on several testbed slices.

use std::path::{Path, PathBuf};

use latency_plan as plan;
use latency_plan::Inventory;
use latency_plan::Plan;
use latency_schedule as schedule;
use latency_schedule::Schedule;

use crate::Failure;

/// The plan, and the testbed of each slice `--testbed` names (comma-separated; without it, the
/// plan's own): all `sim`, or all inventories, each named once; adaptive sessions on one only.
pub(crate) fn load(path: &Path, testbed: Option<&str>) -> Result<(Plan, Vec<Option<Inventory>>), Failure> {
    let names: Vec<Option<&str>> = match testbed {
        Some(t) => t.split(',').map(|n| Some(n.trim())).collect(),
        None => vec![None],
    };
    let mut plan = None;
    let mut inventories = Vec::new();
    for name in &names {
        let (p, inventory) = plan::load(path, *name).map_err(|e| Failure::Invalid(e.0))?;
        plan.get_or_insert(p);
        inventories.push(inventory);
    }
    let plan = plan.ok_or_else(|| Failure::Usage("--testbed: no testbed named".into()))?;
    if inventories.len() > 1 {
        let usage = |m: &str| Err(Failure::Usage(format!("--testbed {}: {m}", testbed.unwrap_or_default())));
        if inventories.iter().any(|i| i.is_some() != inventories[0].is_some()) {
            return usage("the slices are all `sim` or all inventories");
        }
        if let Some(dup) = names.iter().enumerate().find(|(k, n)| *n != &Some("sim") && names[..*k].contains(n)) {
            return usage(&format!("`{}` is named twice: a slice is one testbed", dup.1.unwrap_or_default()));
        }
        if plan.protocol.adaptive.is_some() {
            return usage("adaptive sessions run on one testbed (a program's next session depends on its last)");
        }
    }
    Ok((plan, inventories))
}

/// The inventories' estimates replaced by what the journals of `dirs` measured (none: kept); what
/// was replaced is said on stderr. The simulator has no estimates to replace.
pub(crate) fn measured_costs(inventories: &mut [Option<Inventory>], dirs: &[PathBuf]) -> Result<(), Failure> {
    if dirs.is_empty() {
        return Ok(());
    }
    if inventories.iter().any(Option::is_none) {
        return Err(Failure::Usage(
            "--costs-from: the simulator's steps take their estimates; name an inventory with --testbed".into(),
        ));
    }
    let m = crate::measured::measured(dirs)?;
    for inv in inventories.iter_mut().flatten() {
        eprint!("{}", m.apply(inv));
    }
    Ok(())
}

/// The names of the slices, for messages and the dry run.
pub(crate) fn names(inventories: &[Option<Inventory>]) -> Vec<String> {
    inventories.iter().map(|i| i.as_ref().map_or_else(|| "sim".to_string(), |i| i.name.clone())).collect()
}

/// The schedule of `path` on the testbeds of `--testbed`, with the slices' predicted assignment
/// when there are several.
pub(crate) fn load_schedule(path: &Path, testbed: Option<&str>, costs_from: &[PathBuf]) -> Result<Schedule, Failure> {
    let (plan, mut inventories) = load(path, testbed)?;
    measured_costs(&mut inventories, costs_from)?;
    let mut s = schedule::expand(&plan, inventories[0].as_ref()).map_err(|e| Failure::Invalid(vec![e.diagnostic()]))?;
    if inventories.len() > 1 {
        s.slices = Some(schedule::slices::assign(&s, names(&inventories)));
    }
    Ok(s)
}
