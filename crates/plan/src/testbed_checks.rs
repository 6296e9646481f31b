//! Checks of a plan against the testbed it runs on: what the real hardware refuses (stand-in
//! traces, images not built), and what a plan asks that the inventory cannot do (trace timing
//! without `{{ pace_args }}`, reflection without a reflect port).

use crate::actions::Action;
use crate::bitstream::{self, Bitstream, Programming};
use crate::board::FlashMethod;
use crate::inventory::Inventory;
use crate::model::Plan;
use crate::protocol::{Sender, Timing};
use crate::trace_spec::TraceSource;
use crate::yaml::{self, Diagnostic};

/// What testbed `inv` refuses to run of `plan` because it is the real hardware (an inventory
/// without `stand_in_traces: true`): a stand-in for an absent published trace, an image not built
/// yet (`sha256: unbuilt`). One diagnostic each, at the trace in the plan or the manifest's
/// `sha256`.
pub fn refused_on(plan: &Plan, inv: &Inventory) -> Vec<Diagnostic> {
    if inv.stand_in_traces {
        return Vec::new();
    }
    let mut out = stand_ins_refused(plan, inv);
    let images: Vec<&Bitstream> = plan.programs.iter().flat_map(|p| p.images()).collect();
    for b in images.into_iter().filter(|b| b.sha256 == bitstream::UNBUILT) {
        if out.iter().any(|d| d.file == b.manifest) {
            continue;
        }
        out.push(Diagnostic {
            file: b.manifest.clone(),
            pos: b.sha256_at,
            message: format!(
                "bitstream `{}` is not built (`sha256: {}`); testbed `{}` flashes built images only: build it \
                 (p4-programs/README.md) and put its sha256 here",
                b.name,
                bitstream::UNBUILT,
                inv.name
            ),
        });
    }
    out
}

/// Stand-in traces replay only on testbeds that are not the real hardware: on the others the
/// plan's pcap must be there before a study starts. One diagnostic per trace replayed as a stand-in
/// on `inv`, at the trace in the plan.
fn stand_ins_refused(plan: &Plan, inv: &Inventory) -> Vec<Diagnostic> {
    plan.traces
        .iter()
        .filter_map(|t| match &t.source {
            TraceSource::StandIn { pcap, .. } => Some(Diagnostic {
                file: plan.path.clone(),
                pos: t.at,
                message: format!(
                    "trace `{}`: file not found: {}; testbed `{}` replays published traces only, never a stand-in \
                     (put the file there)",
                    t.name,
                    pcap.display(),
                    inv.name
                ),
            }),
            _ => None,
        })
        .collect()
}

/// A plan that replays with the traces' timing needs a replay command that takes it.
pub(super) fn check_timing(plan: &Plan, inv: &Inventory, diags: &mut Vec<Diagnostic>) {
    let replay = &inv.actions[&Action::Replay];
    if plan.protocol.timing != Timing::Pps && !replay.variables().any(|v| v == "pace_args") {
        diags.push(Diagnostic {
            file: inv.path.clone(),
            pos: yaml::Pos { line: 1, col: 1 },
            message: "plan uses `timing: trace` but the testbed's `replay` command does not use `{{ pace_args }}` \
                      (tcpreplay's `--multiplier`), so it would replay at a fixed rate"
                .into(),
        });
    }
}

/// A plan in soak mode needs an agent command that takes the capture arguments.
pub(super) fn check_soak(plan: &Plan, inv: &Inventory, diags: &mut Vec<Diagnostic>) {
    let start = &inv.actions[&Action::AgentStart];
    if plan.protocol.soak.is_some() && !start.variables().any(|v| v == "capture_args") {
        diags.push(Diagnostic {
            file: inv.path.clone(),
            pos: yaml::Pos { line: 1, col: 1 },
            message: "plan uses `protocol.soak` but the testbed's `agent_start` command does not use \
                      `{{ capture_args }}`, which carry the agent's `--histogram-interval-s`"
                .into(),
        });
    }
}

/// A plan that reflects needs a receiver that can.
/// `sender: agent` needs a reflector that can run on the receiver: a kernel backend (the
/// reflector sends through a packet socket) and a first FPGA interface to receive on.
pub(super) fn check_sender(plan: &Plan, inv: &Inventory, diags: &mut Vec<Diagnostic>) {
    if plan.protocol.sender == Sender::Tcpreplay {
        return;
    }
    let mut refuse = |message: String| {
        diags.push(Diagnostic { file: inv.path.clone(), pos: yaml::Pos { line: 1, col: 1 }, message })
    };
    if inv.receiver.backend == "dpdk" {
        refuse(
            "plan uses `sender: agent` but the receiver's `backend` is dpdk: the reflector takes af-packet or af-xdp \
             (set `receiver.backend`)"
                .into(),
        );
    }
    if inv.receiver.fpga_ifaces.is_empty() {
        refuse(
            "plan uses `sender: agent` but the receiver has no `fpga_ifaces` for the reflector to receive on".into(),
        );
    }
    if let Some(port) = inv.receiver.reflect_port.as_ref().filter(|p| p.bytes().all(|b| b.is_ascii_digit())) {
        refuse(format!(
            "plan uses `sender: agent` but the receiver's `reflect_port` is DPDK port {port}: the reflector sends its \
             echoes through a packet socket, so name the reflect NIC's interface"
        ));
    }
}

/// `port_pairs` past port 1 need as many FPGA interfaces, captured by a kernel backend (the
/// DPDK backend takes two ports).
/// Every image of the plan is built for the testbed's board and shell: a U250 image is never
/// written to a U280, an ESnet image never brought up as an Open-NIC one. One diagnostic per
/// manifest, at its `board` or `shell`.
pub(super) fn check_board(plan: &Plan, inv: &Inventory, diags: &mut Vec<Diagnostic>) {
    let mut images: Vec<&Bitstream> = plan.programs.iter().flat_map(|p| p.images()).collect();
    images.sort_by(|a, b| a.manifest.cmp(&b.manifest));
    images.dedup_by(|a, b| a.manifest == b.manifest);
    let at = |pos: yaml::Pos| format!("{}:{}:{}", inv.path.display(), pos.line, pos.col);
    for b in images {
        if b.board != inv.board {
            diags.push(Diagnostic {
                file: b.manifest.clone(),
                pos: b.board_at,
                message: format!(
                    "bitstream `{}` is built for a {}, but testbed `{}` has a {} ({}): an image is never written \
                     to another board",
                    b.name,
                    b.board.name().to_uppercase(),
                    inv.name,
                    inv.board.name().to_uppercase(),
                    at(inv.board_at)
                ),
            });
        }
        let method = match b.programming {
            Programming::Qspi => inv.qspi_method(),
            Programming::Jtag => inv.flash_methods.contains(&FlashMethod::Jtag).then_some(FlashMethod::Jtag),
        };
        if method.is_none() {
            let needs = match b.programming {
                Programming::Qspi => "`qspi-xbflash2` or `jtag-flash`",
                Programming::Jtag => "`jtag`",
            };
            let has: Vec<&str> = inv.flash_methods.iter().map(|m| m.name()).collect();
            diags.push(Diagnostic {
                file: b.manifest.clone(),
                pos: b.programming_at,
                message: format!(
                    "bitstream `{}` is programmed over {}, which needs the flash method {needs}; testbed `{}` has {} \
                     ({})",
                    b.name,
                    b.programming,
                    inv.name,
                    has.join(", "),
                    at(inv.flash_methods_at)
                ),
            });
        }
        if b.shell != inv.shell {
            diags.push(Diagnostic {
                file: b.manifest.clone(),
                pos: b.shell_at,
                message: format!(
                    "bitstream `{}` is built on the {} shell, but testbed `{}` brings up {} images ({}): its \
                     registers, tables and health are that shell's",
                    b.name,
                    b.shell,
                    inv.name,
                    inv.shell,
                    at(inv.shell_at)
                ),
            });
        }
    }
}

pub(super) fn check_ports(plan: &Plan, inv: &Inventory, diags: &mut Vec<Diagnostic>) {
    let ports = plan.analysis.ports();
    let cmacs = inv.board.facts().cmacs;
    let capture = inv.receiver.capture_ifaces().len();
    if cmacs == 1 && capture < ports {
        diags.push(Diagnostic {
            file: inv.path.clone(),
            pos: inv.receiver.fpga_ifaces_at.unwrap_or(inv.board_at),
            message: format!(
                "plan captures {ports} ports but a {} has one CMAC, so one FPGA port (the pipeline's), and the \
                 receiver gives {capture} capture interface(s): name a NIC port for the bypass copy with \
                 `bypass_iface`{}",
                inv.board.name().to_uppercase(),
                if ports > 2 { "; more than one pair (`port_pairs`) needs a board with two CMACs" } else { "" }
            ),
        });
        return;
    }
    if let (Some(iface), "dpdk") = (&inv.receiver.bypass_iface, inv.receiver.backend.as_str()) {
        diags.push(Diagnostic {
            file: inv.path.clone(),
            pos: inv.receiver.bypass_iface_at.unwrap_or(inv.board_at),
            message: format!(
                "the bypass copy is captured on `{iface}`, a NIC port, which the dpdk backend cannot (it captures the \
                 FPGA's functions): set `receiver.backend` to af-packet or af-xdp"
            ),
        });
    }
    if ports <= 2 {
        return;
    }
    let mut refuse = |message: String| {
        diags.push(Diagnostic { file: inv.path.clone(), pos: yaml::Pos { line: 1, col: 1 }, message })
    };
    let have = inv.receiver.fpga_ifaces.len();
    if have < ports {
        refuse(format!(
            "plan's `port_pairs` capture {ports} ports but the receiver has {have} `fpga_ifaces` (pipeline, bypass, \
             then each further port in order)"
        ));
    }
    if inv.receiver.backend == "dpdk" {
        refuse(format!(
            "plan's `port_pairs` capture {ports} ports, which the dpdk backend cannot (it takes two): set \
             `receiver.backend` to af-packet or af-xdp"
        ));
    }
}

pub(super) fn check_reflect(plan: &Plan, inv: &Inventory, diags: &mut Vec<Diagnostic>) {
    if plan.protocol.reflect && inv.receiver.reflect_port.is_none() {
        diags.push(Diagnostic {
            file: inv.path.clone(),
            pos: yaml::Pos { line: 1, col: 1 },
            message: "plan uses `protocol.reflect` but the receiver has no `reflect_pci` or `reflect_port`".into(),
        });
    }
    if plan.protocol.reflect && inv.receiver.capture.reflect_dst_mac.is_none() {
        diags.push(Diagnostic {
            file: inv.path.clone(),
            pos: yaml::Pos { line: 1, col: 1 },
            message: "plan uses `protocol.reflect` but the receiver has no `reflect_dst_mac` (the MAC of the \
                      sender's capture NIC, which every reflection is addressed to)"
                .into(),
        });
    }
}
