//! Checks of a plan that span its sections: factors against the protocol, port pairs against the
//! capture, and the size of the schedule.

use crate::analysis::Analysis;
use crate::factors::{self, Factor, FactorName};
use crate::programs::Program;
use crate::protocol::{Protocol, Sender, Timing};
use crate::yaml::{Decoder, Node, Pos};

/// Largest schedule a plan may expand to: (programs + null calibrations) × sessions × runs. The
/// paper's study is 400 runs; 100,000 runs of a 40 s replay are 46 days of testbed time, and a
/// larger schedule only exhausts the memory of `plan` and `run`.
pub const MAX_RUNS: u64 = 100_000;

/// Factors the protocol cannot take: a template variable set per level with sessions holding
/// every level, a pacing factor without even pacing, any factor in soak mode.
pub(super) fn factors_with_protocol(
    d: &mut Decoder,
    protocol: Option<&Protocol>,
    factor_list: &[Factor],
    order: Option<factors::Order>,
) {
    if let Some(f) = factor_list.iter().find(|f| matches!(f.name, FactorName::Var(_)))
        && order == Some(factors::Order::SessionLevelRun)
    {
        d.error(
            f.at,
            format!(
                "factor `{}` sets a template variable, which a bring-up uses once per session: it needs `order: \
                 level_session_run`",
                f.name.name()
            ),
        );
    }
    if let (Some(p), Some(f)) = (protocol, factor_list.iter().find(|f| f.name == FactorName::PacingPps))
        && p.timing != Timing::Pps
    {
        d.error(
            f.at,
            "factor `pacing_pps` needs `timing: pps`: with `timing: trace` the trace's time stamps pace the probes",
        );
    }
    if let (Some(p), Some(f)) = (protocol, factor_list.first())
        && p.soak.is_some()
    {
        d.error(f.at, "`protocol.soak` summarises each program over all its runs: it takes no factors");
    }
}

/// Port pairs past the pipeline and bypass ports need a capture of more than two ports, which
/// reflect mode, soak mode and an agent sender (two stamps per probe) do not make.
pub(super) fn port_pairs_with_protocol(d: &mut Decoder, at: Pos, p: &Protocol, a: &Analysis) {
    if a.ports() <= 2 {
        return;
    }
    let clash = [
        (p.reflect, "`protocol.reflect`"),
        (p.soak.is_some(), "`protocol.soak`"),
        (p.sender != Sender::Tcpreplay, "`sender: agent`"),
    ];
    if let Some((_, what)) = clash.iter().find(|c| c.0) {
        d.error(
            at,
            format!(
                "`port_pairs` use {} capture ports, but {what} captures exactly two (pipeline and bypass)",
                a.ports()
            ),
        );
    }
}

/// Adaptive sessions need every level in each bring-up; false (reported at `protocol:`) if not.
pub(super) fn adaptive_order(d: &mut Decoder, at: &Node, p: &Protocol, order: factors::Order) -> bool {
    if p.adaptive.is_some() && order == factors::Order::LevelSessionRun {
        d.error(at.pos, "adaptive sessions need `order: session_level_run` (every level in each bring-up)");
        return false;
    }
    true
}

/// Report, at `protocol:`, a schedule larger than [`MAX_RUNS`].
pub(super) fn size(d: &mut Decoder, at: &Node, p: &Protocol, programs: &[Program], levels: usize) {
    let mut traces: Vec<usize> = programs.iter().filter(|p| p.null.is_some()).map(|p| p.null_trace).collect();
    traces.sort_unstable();
    traces.dedup();
    // One session group per program, and one per null trace for its calibration.
    let groups = (programs.len() + traces.len()) as u64;
    let most = programs.iter().filter_map(|p| p.sessions).fold(p.sessions, u32::max);
    let runs = groups * u64::from(most) * u64::from(p.runs) * levels as u64;
    if runs > MAX_RUNS {
        d.error(
            at.pos,
            format!(
                "schedule of {runs} runs exceeds the limit of {MAX_RUNS}: {groups} session groups (programs and null \
                 calibrations) × {} sessions × {} runs{}",
                most,
                p.runs,
                if levels > 1 { format!(" × {levels} levels") } else { String::new() }
            ),
        );
    }
}
