#!/usr/bin/env bash
# Everything the tests need on a fresh machine, then every test of the
# workspace. No network service is used: the Kafka tests start their own
# broker in-process, the OpenAI adapter is tested against a local server, and
# ScyllaDB tests run only when SCYLLA_URI points at a node (they say so).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
scripts/fetch-minilm.sh >/dev/null
# the end-to-end tests run the binaries as separate processes
cargo build -p chronicle -p chronicle-bench
cargo test --workspace --no-fail-fast "$@"
