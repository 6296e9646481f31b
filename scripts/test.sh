#!/usr/bin/env bash
# The test command: make sure this Debian 12 machine has what the tests need, then run them
# (`make test`: rustfmt check, clippy, docs, the build without DPDK, every test).
#
# As root, missing Debian packages are installed; otherwise each missing one is named with the
# command that installs it. Rust itself must be there (rustup); its rustfmt and clippy components
# and cargo-nextest are added when missing.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian package, and why the tests need it.
packages=(
  "build-essential:compilers and make"
  "pkg-config:finding DPDK"
  "ca-certificates:crates.io over HTTPS"
  "chromium:the HTML report is rendered headless"
  "iproute2:veth pairs and network namespaces"
  "tcpreplay:paced replay on the emulated testbed"
  "tcpdump:reflected probes captured on the emulated sender"
  "openssh-server:the emulated testbed's hosts"
  "openssh-client:the orchestrator reaches hosts over SSH"
  "dpdk:DPDK's drivers for the agent's DPDK backend"
  "dpdk-dev:DPDK's tools"
  "libdpdk-dev:the DPDK bindings (dpdk-sys)"
  "libclang-dev:bindgen for the DPDK bindings"
  "shellcheck:every rendered host command is checked"
  "groff-base:the manual pages are rendered"
  "python3-venv:DuckDB, pyarrow and pandas read a results folder, check-jsonschema the YAML files, scapy the traces, in tests"
)

missing=()
for entry in "${packages[@]}"; do
  pkg=${entry%%:*}
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$entry")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "--- installing: ${missing[*]%%:*}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]%%:*}" >/dev/null
  else
    echo "test: missing Debian packages (install them as root, or run this script as root):" >&2
    for entry in "${missing[@]}"; do
      echo "  ${entry%%:*}: ${entry#*:}" >&2
    done
    echo "  apt-get install ${missing[*]%%:*}" >&2
    exit 2
  fi
fi

if ! command -v cargo >/dev/null; then
  echo "test: cargo not found: install Rust with rustup (https://rustup.rs), then run this again" >&2
  exit 2
fi
echo "--- Rust components"
rustup component add rustfmt clippy >/dev/null
command -v cargo-nextest >/dev/null || cargo install cargo-nextest --locked

# Other tools reading our files: DuckDB, pyarrow and pandas (results), check-jsonschema (plans,
# inventories and manifests against schemas/) and scapy (generated traces) from PyPI, in a
# virtual environment; and FD.io CSIT's jumpavg, the reference of the trend's change detection.
venv=${LATENCY_TEST_VENV:-/opt/latency-test-venv}
if ! "$venv/bin/python" -c "import duckdb, pyarrow, pandas, check_jsonschema, scapy, jumpavg" 2>/dev/null; then
  echo "--- Python readers (DuckDB, pyarrow, pandas, check-jsonschema, scapy) and jumpavg into $venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q duckdb pyarrow pandas check-jsonschema scapy jumpavg==0.4.2
fi
export LATENCY_TEST_PYTHON="$venv/bin/python"

echo "--- tests: make test"
exec make test
