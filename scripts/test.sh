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
  "default-jre-headless:Spark (pyspark) reads the results history in tests"
)

# What the tests build takes about 3.6 GiB under target/, the Python readers 1.4 GiB. A disk without
# room for what is not there yet is named up front, and again after a failure, where a log's tail
# shows it (a build that runs out of room fails half-way with "No space left on device").
free_mib() { echo $(($(df -Pk . | awk 'NR == 2 { print $4 }') / 1024)); }
need_mib=0
[ -d target/debug ] || need_mib=$((need_mib + 3700))
[ -d "${LATENCY_TEST_VENV:-/opt/latency-test-venv}" ] || need_mib=$((need_mib + 1400))
if [ "$(free_mib)" -lt "$need_mib" ]; then
  echo "test: warning: $(free_mib) MiB free here, the build and the test tools need about $need_mib MiB more" >&2
fi

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
    apt-get clean
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
# inventories and manifests against schemas/), scapy (generated traces) and Spark (the results
# history) from PyPI, in a virtual environment; FD.io CSIT's jumpavg, the reference of the trend's
# change detection; and moto, an S3-compatible server for the history store's tests.
venv=${LATENCY_TEST_VENV:-/opt/latency-test-venv}
if ! "$venv/bin/python" -c "import duckdb, pyarrow, pandas, check_jsonschema, scapy, jumpavg, pyspark, moto.server" 2>/dev/null; then
  echo "--- Python readers (DuckDB, pyarrow, pandas, check-jsonschema, scapy, pyspark), jumpavg and moto into $venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --no-cache-dir duckdb pyarrow pandas check-jsonschema scapy jumpavg==0.4.2 pyspark "moto[server]"
fi
export LATENCY_TEST_PYTHON="$venv/bin/python"

# The research community's RO-Crate validator (roc-validator) checks every results folder's
# ro-crate-metadata.json; in a virtual environment of its own (its RDF stack stays apart from the
# readers'), with ro-crate-py 0.15, whose copy of the RO-Crate 1.1 context is put into the
# validator's cache, so that it validates offline.
rvenv=${LATENCY_ROCRATE_VENV:-/opt/latency-rocrate-venv}
if ! "$rvenv/bin/python" -c "import rocrate_validator, rocrate" 2>/dev/null; then
  echo "--- roc-validator and ro-crate-py into $rvenv"
  python3 -m venv "$rvenv"
  "$rvenv/bin/pip" install -q --no-cache-dir roc-validator==0.13.0 rocrate==0.15.0
fi
"$rvenv/bin/python" scripts/rocrate-seed-cache.py
export LATENCY_TEST_ROCRATE="$rvenv/bin/rocrate-validator"

# The S3-compatible server of the store's tests, on a free port of 127.0.0.1, stopped on exit.
port=$("$venv/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$venv/bin/moto_server" -H 127.0.0.1 -p "$port" >"${TMPDIR:-/tmp}/latency-test-moto.log" 2>&1 &
moto_pid=$!
trap 'kill "$moto_pid" 2>/dev/null || true' EXIT
"$venv/bin/python" - "$port" <<'PY' || { echo "test: moto_server did not start (see ${TMPDIR:-/tmp}/latency-test-moto.log)" >&2; exit 2; }
import sys, time, urllib.request
for _ in range(100):
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/", timeout=1)
        sys.exit(0)
    except OSError:
        time.sleep(0.2)
sys.exit(1)
PY
export LATENCY_TEST_S3="http://127.0.0.1:$port"
echo "--- S3-compatible server (moto) on $LATENCY_TEST_S3"

echo "--- tests: make test"
status=0
make test || status=$?
if [ "$status" != 0 ] && [ "$(free_mib)" -lt 1024 ]; then
  echo "test: failed with only $(free_mib) MiB left free on this disk" >&2
fi
exit "$status"
