#!/usr/bin/env bash
# Orchestration overhead on the emulated testbed: runs plans/emulated.yaml (or $PLAN) over SSH
# and splits its wall time into the replay floor (probes / pacing, per run), the steps' own time
# and what is left (orchestration overhead), per step kind and in total. Needs root and the
# emulated testbed's tools; brings the testbed up and down itself.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
plan=${PLAN:-$repo/plans/emulated.yaml}
out=$(mktemp -d)/results
"$repo/testbeds/emulated/up.sh" >/dev/null
trap '"$repo/testbeds/emulated/down.sh" >/dev/null 2>&1 || true' EXIT
start=$(date +%s.%N)
"$repo/target/release/orchestrate" run "$plan" --out "$out" >/dev/null 2>&1
end=$(date +%s.%N)
python3 - "$out" "$start" "$end" <<'PY'
import json, sys, collections
out, start, end = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
events = [json.loads(l) for l in open(f"{out}/journal.jsonl")]
plan = json.load(open(f"{out}/provenance.json"))
groups = {g["program"]: g for g in plan["groups"]}
wall = end - start
steps = collections.defaultdict(list)
for e in events:
    if e["event"] == "step_finished":
        steps[e["action"]].append(e["seconds"])
runs = [e for e in events if e["event"] == "run_finished"]
pps = None
for line in open(f"{out}/plan.yaml"):
    if line.strip().startswith("pacing_pps:"):
        pps = float(line.split(":")[1])
floor = sum(groups[r["program"]]["probes"] / pps for r in runs)
run_time = sum(r["seconds"] for r in runs)
step_time = sum(sum(v) for v in steps.values())
print(f"bench-e2e: {len(runs)} runs, wall {wall:.2f} s; replay floor {floor:.2f} s; runs took {run_time:.2f} s "
      f"(per run {1000 * (run_time - floor) / len(runs):.0f} ms beyond its replay: begin/end, drain 100 ms, download)")
print(f"bench-e2e: bring-up/teardown steps {step_time:.2f} s; the rest (connect, staging, analysis, report) {wall - run_time - step_time:.2f} s")
for action, v in sorted(steps.items()):
    v = sorted(v)
    print(f"bench-e2e:   {action:<20} n={len(v):<3} median {1000 * v[len(v) // 2]:7.1f} ms  max {1000 * v[-1]:7.1f} ms")
trivial = [s for a in ("table_load", "reset_method_clear", "driver_bind") for s in steps.get(a, [])]
if trivial:
    trivial.sort()
    print(f"bench-e2e: remote step overhead (steps whose command is `true`): median {1000 * trivial[len(trivial) // 2]:.1f} ms (goal <= 25 ms)")
print(f"bench-e2e: overhead beyond the replay floor: {wall - floor:.2f} s = {100 * (wall - floor) / floor:.0f} % of the floor for these short runs")
per_run = (run_time - floor) / len(runs)
print(f"bench-e2e: per-run overhead {1000 * per_run:.0f} ms = {100 * per_run / 40:.2f} % of a paper run (20,000 probes at 500 pps = 40 s; goal <= 1 %)")
PY
rm -rf "$(dirname "$out")"
