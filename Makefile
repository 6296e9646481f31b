# Entry points. `make test` is what CI runs.
CARGO ?= cargo
PLAN ?= plans/paper.yaml

.PHONY: build test lint fmt-check clippy doc unit run-sim bench-sim clean

build:
	$(CARGO) build --release --bin orchestrate

## Everything CI checks: formatting, lints (warnings are errors), docs, then the tests.
test: fmt-check clippy doc unit

fmt-check:
	$(CARGO) fmt --all --check

clippy:
	$(CARGO) clippy --workspace --all-targets -- -D warnings

doc:
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --workspace --no-deps

unit:
	$(CARGO) nextest run --workspace --no-fail-fast

## The whole paper study on the built-in simulated testbed.
run-sim: build
	./target/release/orchestrate run $(PLAN) --testbed sim

clean:
	$(CARGO) clean
