# Entry points. `make test` is what CI runs.
CARGO ?= cargo
PLAN ?= plans/paper.yaml

.PHONY: build install schemas test fmt-check clippy doc architecture docs-check no-dpdk unit run-sim bench-sim bench-codecs bench-sweep bench-analysis validate-stats validate-nightly validate-trend bench-agent bench-soak bench-trend bench-slices testbed-up testbed-down bench-e2e clean

build:
	$(CARGO) build --release --bin orchestrate

## The binary, its manual page and shell completions (bash, zsh, fish) under $(DESTDIR)$(PREFIX).
PREFIX ?= /usr/local
install: build
	install -Dm755 target/release/orchestrate $(DESTDIR)$(PREFIX)/bin/orchestrate
	install -d $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/bash-completion/completions \
	  $(DESTDIR)$(PREFIX)/share/zsh/site-functions $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d
	./target/release/orchestrate man --out $(DESTDIR)$(PREFIX)/share/man/man1
	./target/release/orchestrate completions bash > $(DESTDIR)$(PREFIX)/share/bash-completion/completions/orchestrate
	./target/release/orchestrate completions zsh > $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_orchestrate
	./target/release/orchestrate completions fish > $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/orchestrate.fish

## The JSON Schemas of plans, inventories and manifests, regenerated from the decoders.
schemas: build
	./target/release/orchestrate schema --out schemas

## Everything CI checks: formatting, lints (warnings are errors), docs, the architecture's rules,
## the reference's links, then the tests.
test: fmt-check clippy doc architecture docs-check no-dpdk unit

## No crate depends on a higher layer (ARCHITECTURE.md's table), no two modules of a crate import
## each other.
architecture:
	python3 scripts/check-layers
	python3 scripts/check-modules

## Every link and anchor of README.md, ARCHITECTURE.md and docs/; the guide's length.
docs-check:
	python3 scripts/check-docs

fmt-check:
	$(CARGO) fmt --all --check

# The DPDK backend is built and tested too (CI installs libdpdk-dev + libclang-dev).
FEATURES ?= --all-features

clippy:
	$(CARGO) clippy --workspace --all-targets $(FEATURES) -- -D warnings

doc:
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --workspace --no-deps $(FEATURES)

# Without the `dpdk` feature the workspace builds on a machine without DPDK (pkg-config finds none).
no-dpdk:
	PKG_CONFIG_LIBDIR=/nonexistent $(CARGO) check --workspace --all-targets

# The end-to-end tests start binaries of other packages (fpga-emu, latency-agent): build them all.
unit:
	$(CARGO) build --workspace --bins $(FEATURES)
	$(CARGO) nextest run --workspace --no-fail-fast $(FEATURES)

## The whole paper study on the built-in simulated testbed.
run-sim: build
	./target/release/orchestrate run $(PLAN) --testbed sim

## Paper-scale study (400 runs, ~16 M records) on the simulated testbed, generated, stored, analysed
## and reported: wall time, peak memory, and how long after its last run the summary was written.
bench-sim: build
	@out=$$(mktemp -d)/results; \
	for i in 1 2 3; do \
	  rm -rf $$out; \
	  /usr/bin/time -f '%e %M' -o $$out.time ./target/release/orchestrate run plans/paper.yaml --testbed sim --out $$out >/dev/null 2>&1 || { cat $$out.time; exit 1; }; \
	  read wall rss < $$out.time; \
	  last=$$(grep '"event":"run_finished"' $$out/journal.jsonl | tail -1 | sed 's/^{"t":\([0-9]*\),.*/\1/'); \
	  summary=$$(stat -c %.3Y $$out/summary.json | tr -d .); \
	  echo "bench-sim: try $$i: wall $$wall s (target <= 3 s), peak RSS $$((rss / 1024)) MiB, summary.json $$((summary - last)) ms after the last run (target <= 1000 ms)"; \
	done; \
	records=$$(grep -o '"records":[0-9]*' $$out/journal.jsonl | cut -d: -f2 | paste -sd+ | bc); \
	echo "bench-sim: plans/paper.yaml on sim: $$records records in $$(find $$out/data -name '*.parquet' | wc -l) run files, $$(du -sh $$out/data | cut -f1) of Parquet, $$(du -sh $$out/pairs | cut -f1) of reductions"; \
	rm -rf $$(dirname $$out)

## How run files are encoded, by measurement: the paper study's run files written again with each
## candidate encoding and compression and read back as the analysis reads them.
bench-codecs: build
	@out=$$(mktemp -d)/results; \
	./target/release/orchestrate run plans/paper.yaml --testbed sim --out $$out >/dev/null 2>&1; \
	$(CARGO) run --release -q -p latency-results --example run_file_codecs -- $$out; \
	rm -rf $$(dirname $$out)

## A study with factors at scale: plans/load-sweep.yaml (20 levels × the paper's 5 × 10 × 20,000
## probes, with its null calibrations) run, analysed and reported on sim; wall time and peak memory.
bench-sweep: build
	@out=$$(mktemp -d)/results; \
	/usr/bin/time -f '%e %M' -o $$out.time ./target/release/orchestrate run plans/load-sweep.yaml --testbed sim --out $$out >/dev/null 2>&1 || { cat $$out.time; exit 1; }; \
	read wall rss < $$out.time; \
	records=$$(grep -o '"records":[0-9]*' $$out/journal.jsonl | cut -d: -f2 | paste -sd+ | bc); \
	echo "bench-sweep: plans/load-sweep.yaml on sim: $$(grep -c '"null_level":' $$out/summary.json) levels in summary.json, $$records records in $$(find $$out/data -name '*.parquet' | wc -l) run files"; \
	echo "bench-sweep: wall $$wall s (target <= 60 s), peak RSS $$((rss / 1024)) MiB (target <= 2048 MiB)"; \
	rm -rf $$(dirname $$out)

## The estimators against the simulator's truth: 40 seeds of the paper plan, per program the bias,
## RMSE and 95 % interval coverage of p5/p50/p99 (raw and corrected), and mode separation; then
## the same with FiveTuple's two modes only 8 ns apart. SEEDS=N for another count, PLAN=FILE for
## another plan than the paper's (e.g. plans/paper-designed.yaml).
SEEDS ?= 40
PLAN ?= plans/paper.yaml
validate-stats:
	$(CARGO) run --release -q -p orchestrator --example validate_stats -- $(SEEDS) --plan $(abspath $(PLAN))
	$(CARGO) run --release -q -p orchestrator --example validate_stats -- $(SEEDS) --plan $(abspath $(PLAN)) --modes-apart 8

## A nightly plan against its reference on the simulator: per seed (SEEDS, 40) a reference study,
## a steady night and one night per program with that program 5 ns slower, each judged by
## `compare`; how often steady nights alarm and each shift is caught (exit 1 off target).
NIGHTLY ?= plans/nightly.yaml
REFERENCE ?= plans/nightly-reference.yaml
validate-nightly:
	$(CARGO) run --release -q -p orchestrator --example validate_nightly -- $(SEEDS) --plan $(abspath $(NIGHTLY)) --reference $(abspath $(REFERENCE))

## The nightly trend's gates and confirmation on the twin: SEEDS histories of 30 nights, steady and
## with Forward 5 ns slower from night 20 (alerts caught ≥ 95 %, false alerts ≤ 1 per 100 nights).
validate-trend:
	$(CARGO) run --release -q -p orchestrator --example validate_trend -- $(SEEDS) --plan $(abspath $(NIGHTLY))

## `orchestrate analyze` on paper-scale simulated results, as a study leaves them (each run's
## reduction kept) and in full (reductions removed: every run file decoded and paired); beside them,
## in the same run, the floor of any reader (pyarrow decoding the three columns the estimator needs)
## and the paper's estimator as one DuckDB query; wall time, peak memory and the ratios.
bench-analysis: build
	@out=$$(mktemp -d)/results; \
	./target/release/orchestrate run plans/paper.yaml --testbed sim --out $$out >/dev/null 2>&1; \
	py=$${LATENCY_TEST_PYTHON:-/opt/latency-test-venv/bin/python}; \
	[ -x "$$py" ] || { echo "bench-analysis: no pyarrow and DuckDB to compare with ($$py; scripts/test.sh installs them)"; exit 1; }; \
	for i in 1 2 3; do \
	  /usr/bin/time -f '%e %M' -o $$out.time ./target/release/orchestrate analyze $$out >/dev/null 2>&1 || { cat $$out.time; exit 1; }; \
	  read wall rss < $$out.time; \
	  rm -rf $$out/pairs; \
	  /usr/bin/time -f '%e %M' -o $$out.full ./target/release/orchestrate analyze $$out >/dev/null 2>&1 || { cat $$out.full; exit 1; }; \
	  read full frss < $$out.full; \
	  set -- $$($$py orchestrator/tests/readers/bench_duckdb.py $$out 2.89e9); \
	  floor=$$4; \
	  echo "bench-analysis: try $$i: analyze $$wall s ($$(echo "scale=2; $$wall / $$floor" | bc) x the floor, target <= 1.3), peak RSS $$((rss / 1024)) MiB; in full $$full s ($$(echo "scale=2; $$full / $$floor" | bc) x), $$((frss / 1024)) MiB; pyarrow decoding floor $$floor s; DuckDB estimator $$2 s"; \
	done; \
	echo "bench-analysis: $$(find $$out/data -name '*.parquet' | wc -l) run files, $$(grep -o '"records":[0-9]*' $$out/journal.jsonl | cut -d: -f2 | paste -sd+ | bc) records"; \
	rm -rf $$(dirname $$out)

## `orchestrate trend` over a synthetic year of nightly paper-scale studies in a history folder
## (365 nights × 4 programs, 800,000 per-probe estimates a night): wall time and peak memory.
NIGHTS ?= 365
bench-trend: build
	@store=$$(mktemp -d)/history; \
	$(CARGO) run --release -q -p orchestrator --example history_year -- $$store $(NIGHTS); \
	echo "bench-trend: store of $$(find $$store -name '*.parquet' | wc -l) Parquet files, $$(du -sh $$store | cut -f1)"; \
	for i in 1 2 3; do \
	  /usr/bin/time -f '%e %M' -o $$store.time ./target/release/orchestrate trend --store $$store --json > $$store.json 2>/dev/null || true; \
	  set -- $$(tail -n 1 $$store.time); wall=$$1; rss=$$2; \
	  echo "bench-trend: try $$i: $$(grep -c '"value_ns"' $$store.json) nightly figures, $$(grep -c '"shift_ns"' $$store.json) changes: wall $$wall s (target <= 2 s), peak RSS $$((rss / 1024)) MiB (target <= 1024 MiB)"; \
	done; \
	rm -rf $$(dirname $$store)

## One plan on one and on two simulated testbed slices with --realtime (steps at 0.5 % of their
## predicted time, testbeds/sim/fast-steps.yaml): wall times and their ratio.
bench-slices: build
	@out=$$(mktemp -d); \
	for tb in sim sim,sim; do \
	  /usr/bin/time -f '%e' -o $$out/$$tb.time ./target/release/orchestrate run plans/smoke.yaml --testbed $$tb --realtime \
	    --sim-model testbeds/sim/fast-steps.yaml --out $$out/$$tb --quiet >/dev/null || { cat $$out/$$tb.time; exit 1; }; \
	done; \
	one=$$(tail -n 1 $$out/sim.time); two=$$(tail -n 1 $$out/sim,sim.time); \
	echo "bench-slices: plans/smoke.yaml --realtime: one slice $$one s, two slices $$two s, ratio $$(echo "scale=2; $$two / $$one" | bc) (target <= 0.6)"; \
	rm -rf $$out

## The agent: per-packet record path (cargo bench) and sustained zero-loss capture rate on veth
## pairs (needs root, ip, tcpreplay).
bench-agent: build
	$(CARGO) build --release -p latency-agent
	$(CARGO) bench -p latency-agent --bench record_path
	$(CARGO) bench -p latency-agent --bench backend_poll
	$(CARGO) bench -p latency-agent --bench soak -- 100000000
	agent/benches/capture-rate.sh ./target/release/latency-agent ./target/release/orchestrate

## Soak mode: cost per packet and peak memory of 10^9 probes through the agent's histogram path.
bench-soak:
	$(CARGO) bench -p latency-agent --bench soak

## Emulated testbed in network namespaces (root; iproute2, openssh-server, tcpreplay).
testbed-up:
	$(CARGO) build --release -p fpga-emu -p latency-agent -p orchestrator
	testbeds/emulated/up.sh

testbed-down:
	testbeds/emulated/down.sh

## Orchestration overhead of a study on the emulated testbed, per step and in total.
bench-e2e:
	$(CARGO) build --release -p fpga-emu -p latency-agent -p orchestrator
	testbeds/emulated/bench-e2e.sh

clean:
	$(CARGO) clean
