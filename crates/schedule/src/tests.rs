//! The expansion of plans into schedules: sessions, levels, runs, steps and predicted times.

use std::path::Path;

use super::*;
use latency_plan::factors::Order;
use latency_plan::{Action, FlashPolicy, Level, Plan};

fn plan(rel: &str) -> Plan {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../orchestrator").join(rel);
    latency_plan::load(&path, Some("sim")).map_err(|e| format!("{:?}", e.0)).expect("the fixture plan loads").0
}

#[test]
fn programs_then_one_null_group_per_trace_each_with_its_sessions_and_runs() {
    // 2 programs on 2 traces, 3 sessions × 4 runs, 20,000 probes at 500 pps, 2 s idle gaps.
    let s = expand(&plan("tests/fixtures/good/study.yaml"), None).expect("expands");
    let names: Vec<String> = s.sessions.iter().map(Session::name).collect();
    assert_eq!(
        names,
        [
            "forward_s1",
            "forward_s2",
            "forward_s3",
            "five_tuple_s1",
            "five_tuple_s2",
            "five_tuple_s3",
            "null-fwd_s1",
            "null-fwd_s2",
            "null-fwd_s3",
            "null-ft_s1",
            "null-ft_s2",
            "null-ft_s3",
        ]
    );
    assert!(s.sessions.iter().enumerate().all(|(i, x)| x.index == i && x.runs.len() == 4));
    assert_eq!(s.sessions[6].kind, SessionKind::Null);
    assert_eq!(s.sessions[6].trace, "fwd");
    // Every session a full bring-up (flash: every_session), ending with the agent's stop.
    for x in &s.sessions {
        assert_eq!(x.steps[0].action, Action::Flash);
        assert_eq!(x.teardown.iter().map(|t| t.action).collect::<Vec<_>>(), [Action::AgentStop]);
        assert!(x.runs.iter().all(|r| r.steps.iter().map(|t| t.action).eq([Action::Replay])));
    }
    // By hand: 48 runs × 40 s of replay; 12 sessions × 3 gaps × 2 s.
    let p = s.predicted_seconds;
    assert_eq!((p.replay, p.idle_gaps), (48.0 * 40.0, 12.0 * 3.0 * 2.0));
    assert!((p.total - (p.replay + p.idle_gaps + p.bring_up + p.run_steps)).abs() < 1e-9);
}

#[test]
fn on_change_flashes_only_when_the_image_on_the_card_changes() {
    let mut p = plan("tests/fixtures/good/study.yaml");
    p.protocol.flash = FlashPolicy::OnChange;
    let s = expand(&p, None).expect("expands");
    let flashed: Vec<bool> = s.sessions.iter().map(|x| x.steps.iter().any(|t| t.action == Action::Flash)).collect();
    // forward ×3, five_tuple ×3, then the null image ×6 (both traces use golden_nic).
    assert_eq!(flashed, [true, false, false, true, false, false, true, false, false, false, false, false]);
    // What a session leaves out it keeps apart, for when the card may not hold its image.
    for (x, flashed) in s.sessions.iter().zip(flashed) {
        let apart: Vec<Action> = x.write_first.iter().map(|t| t.action).collect();
        assert_eq!(apart, if flashed { vec![] } else { vec![Action::Flash, Action::Boot] }, "{}", x.name());
        // A session that writes leaves the same steps out should the card already hold its image.
        assert_eq!(x.unless_held, if flashed { vec![Action::Flash, Action::Boot] } else { vec![] }, "{}", x.name());
    }
    // What the card reads back running each session's image: the manifest's sha256.
    assert!(s.sessions.iter().all(|x| x.identity.sha256.as_ref().is_some_and(|h| h.len() == 64)));
    // Every session writes its image under `every_session`: nothing is ever left out.
    p.protocol.flash = FlashPolicy::EverySession;
    assert!(expand(&p, None).expect("expands").sessions.iter().all(|x| x.unless_held.is_empty()));
}

/// (session, run, level) of every run of `program`'s sessions.
fn runs_of(s: &Schedule, program: &str) -> Vec<(u32, u32, String)> {
    s.sessions
        .iter()
        .filter(|x| x.program == program)
        .flat_map(|x| x.runs.iter().map(move |r| (x.session, r.run, r.level.as_ref().map_or("-".into(), Level::name))))
        .collect()
}

#[test]
fn levels_nest_inside_sessions_or_sessions_inside_levels_and_nulls_run_the_traffic_levels() {
    // 4 pacing × 2 frame sizes, 2 sessions × 3 runs.
    let mut p = plan("tests/fixtures/good/sweep.yaml");
    let s = expand(&p, None).expect("expands");
    let fwd = runs_of(&s, "forward");
    assert_eq!(fwd.len(), 2 * 8 * 3);
    assert_eq!(fwd[3], (1, 4, "pacing_pps=500/frame_size=256".into()));
    assert_eq!(fwd[24], (2, 1, "pacing_pps=500/frame_size=128".into()));
    // The null: each frame size at the base pacing, in each of its 2 sessions.
    let null: Vec<String> = runs_of(&s, "null-fwd").into_iter().map(|r| r.2).collect();
    assert_eq!(null.len(), 2 * 2 * 3);
    assert!(null[..3].iter().all(|l| l == "pacing_pps=500/frame_size=128"), "{null:?}");
    // Runs replay the level's trace at the level's pacing.
    let r = &s.sessions[0].runs[23];
    assert_eq!((r.pacing_pps, r.trace.as_str()), (Pps(19e6), "fwd-256B"));
    assert_eq!(s.levels.len(), 8);

    p.factors.order = Order::LevelSessionRun;
    let s = expand(&p, None).expect("expands");
    let fwd = runs_of(&s, "forward");
    assert_eq!(fwd[3], (2, 1, "pacing_pps=500/frame_size=128".into()), "level 1 has sessions 1 and 2");
    assert_eq!(fwd.last().cloned(), Some((16, 3, "pacing_pps=19000000/frame_size=256".into())));

    // Without a factor that changes the traffic, one null calibration serves every level.
    p.factors.factors.retain(|f| f.name == latency_plan::FactorName::PacingPps);
    p.factors.design = latency_plan::factors::Design::Zip;
    let s = expand(&p, None).expect("expands");
    let null: Vec<String> = runs_of(&s, "null-fwd").into_iter().map(|r| r.2).collect();
    assert_eq!(null, vec!["pacing_pps=500".to_string(); 6]);
}

#[test]
fn durations_read_as_hours_minutes_seconds() {
    assert_eq!(hms(59.4), "59s");
    assert_eq!(hms(61.0), "1m01s");
    assert_eq!(hms(3600.0 * 5.0 + 62.0), "5h01m02s");
}

#[test]
fn rates_are_written_whole_when_whole_and_as_slow_as_the_trace_otherwise() {
    assert_eq!(serde_json::to_string(&Pps(2000.0)).unwrap(), "2000");
    assert_eq!(serde_json::to_string(&Pps(0.25)).unwrap(), "0.25");
    assert_eq!((Pps(0.25).whole(), Pps(2000.4).whole()), (1, 2000));
    assert_eq!(f64::from(Pps::from(500)), 500.0);
}

#[test]
fn one_more_of_each_level_costs_what_the_plan_and_the_estimates_say() {
    // 20,000 probes at 500 pps: 40 s of replay, 2 ms a probe; a 2 s idle gap before each later run.
    let s = expand(&plan("tests/fixtures/good/study.yaml"), None).expect("expands");
    let c = s.costs().expect("costs");
    assert!((c.probe_s - 0.002).abs() < 1e-12, "{c:?}");
    let first = &s.sessions[0];
    let run_steps: f64 =
        first.runs[1].steps.iter().filter(|st| st.action != Action::Replay).map(|st| st.estimate_s).sum();
    assert!((c.run_s - (2.0 + 40.0 + run_steps)).abs() < 1e-9, "{c:?}");
    // Flash 420 + boot 30 + driver reload 15 + PCIe 3 + 6 + tables 3 + the rest, as the
    // built-in estimates give them, plus the capture's settling before the first run in place of
    // the idle gap its run is priced with.
    let bring_up: f64 = first.steps.iter().chain(&first.teardown).map(|st| st.estimate_s).sum::<f64>()
        + first.runs[0].wait_before_s
        - 2.0;
    assert!(bring_up > 420.0 && (c.session_s - bring_up).abs() < 1e-9, "{c:?}");
}

fn oct_inventory() -> latency_plan::Inventory {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testbeds/oct-u280.yaml");
    let mut diags = Vec::new();
    latency_plan::yaml::load_file(&path, &mut diags, latency_plan::inventory::decode).expect("the OCT inventory loads")
}

/// Which sessions write the flash and which boot, in schedule order.
fn writes_and_boots(s: &Schedule) -> (Vec<bool>, Vec<bool>) {
    let has = |x: &Session, a: Action| x.steps.iter().any(|t| t.action == a);
    (
        s.sessions.iter().map(|x| has(x, Action::Flash)).collect(),
        s.sessions.iter().map(|x| has(x, Action::Boot)).collect(),
    )
}

#[test]
fn redraw_boots_every_session_and_writes_an_image_only_where_a_boot_redraws_and_the_card_holds_it() {
    let mut p = plan("tests/fixtures/good/study.yaml");
    p.protocol.flash = FlashPolicy::Redraw;
    // Where only writing the flash redraws the mode (the default), every session writes.
    let mut inv = oct_inventory();
    assert_eq!(inv.mode_redrawn_by, [Action::Flash, Action::FlashJtag]);
    let s = expand(&p, Some(&inv)).expect("expands");
    let (writes, boots) = writes_and_boots(&s);
    assert!(writes.iter().all(|&w| w) && boots.iter().all(|&b| b));
    // The write is what redraws the mode: never left out, even where the card holds the image.
    assert!(s.sessions.iter().all(|x| x.unless_held.is_empty()));
    // Where a boot redraws it: one write per image change (forward, five_tuple, the null image
    // both traces use), a boot every session.
    inv.mode_redrawn_by = vec![Action::Flash, Action::Boot];
    let s = expand(&p, Some(&inv)).expect("expands");
    let (writes, boots) = writes_and_boots(&s);
    assert_eq!(writes, [true, false, false, true, false, false, true, false, false, false, false, false]);
    assert!(boots.iter().all(|&b| b));
    assert!(s.sessions.iter().zip(&writes).all(|(x, &w)| (x.write_first.len(), w) == (0, true)
        || (x.write_first.iter().map(|t| t.action).eq([Action::Flash]) && !w)));
    // A session that writes would only boot, were the card to hold its image already.
    assert!(
        s.sessions.iter().zip(&writes).all(|(x, &w)| x.unless_held == if w { vec![Action::Flash] } else { vec![] })
    );
    // One more session costs a boot's bring-up, not a write's; the three writes are paid once.
    let c = s.costs().expect("costs");
    let flash = inv.estimates_s[&Action::Flash];
    let later = &s.sessions[1];
    let bring_up = later.steps.iter().chain(&later.teardown).map(|st| st.estimate_s).sum::<f64>()
        + later.runs[0].wait_before_s
        - later.runs[1].wait_before_s;
    assert!((c.session_s - bring_up).abs() < 1e-9 && bring_up < flash, "{c:?}");
    let every = {
        let mut p = p.clone();
        p.protocol.flash = FlashPolicy::EverySession;
        expand(&p, Some(&inv)).expect("expands")
    };
    // The schedule is the every-session one less nine writes.
    assert!((every.predicted_seconds.total - s.predicted_seconds.total - 9.0 * flash).abs() < 1e-6);
    // What the sessions and runs at their price leave: the three writes, less the table loads the
    // six null sessions do not have (priced as the program sessions).
    let nulls_without_tables = s
        .sessions
        .iter()
        .filter(|x| x.kind == SessionKind::Null && x.steps.iter().all(|t| t.action != Action::TableLoad))
        .count();
    assert_eq!(nulls_without_tables, 6);
    assert!((c.fixed_s - (3.0 * flash - 6.0 * inv.estimates_s[&Action::TableLoad])).abs() < 1e-6, "{c:?}");
}

#[test]
fn the_agents_af_packet_rings_hold_the_longest_frame_of_the_sessions_runs() {
    // 4 pacing × 2 frame sizes (128 and 256 B), 2 sessions × 3 runs.
    let mut p = plan("tests/fixtures/good/sweep.yaml");
    let mut inv = oct_inventory();
    // The agent's slot size: the session's longest frame and 64 B, each session's runs' own
    // frame sizes read from their levels.
    let check = |s: &Schedule, expect_slots: bool| {
        for x in &s.sessions {
            let start = x.steps.iter().find(|t| t.action == Action::AgentStart).expect("the agent starts");
            let command = start.command.as_deref().expect("rendered");
            let longest = x
                .runs
                .iter()
                .filter_map(|r| r.level.as_ref()?.get(latency_plan::FactorName::FrameSize))
                .max()
                .expect("a frame size");
            let arg = format!("--longest-frame {}", longest + 64);
            assert_eq!(command.contains(&arg), expect_slots, "{}: {command}", x.name());
            assert_eq!(command.contains("--longest-frame"), expect_slots, "{}: {command}", x.name());
        }
    };
    // DPDK (the inventory's backend) has no ring slots to size.
    check(&expand(&p, Some(&inv)).expect("expands"), false);
    inv.receiver.backend = "af-packet".into();
    let s = expand(&p, Some(&inv)).expect("expands");
    check(&s, true);
    assert!(
        s.sessions.iter().all(|x| x.steps.iter().any(|t| t
            .command
            .as_deref()
            .unwrap_or("")
            .contains("--longest-frame 320")))
    );
    // One level a session: sessions of 128 B frames get slots for 192 B.
    p.factors.order = Order::LevelSessionRun;
    let s = expand(&p, Some(&inv)).expect("expands");
    check(&s, true);
    let slots: Vec<bool> = s
        .sessions
        .iter()
        .map(|x| x.steps.iter().any(|t| t.command.as_deref().unwrap_or("").contains("--longest-frame 192")))
        .collect();
    assert!(slots.contains(&true) && slots.contains(&false), "{slots:?}");
}
