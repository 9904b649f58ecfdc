#!/usr/bin/env bash
# Runs one cargo-fuzz target for a while from its seed corpus:
#   scripts/fuzz.sh TARGET [SECONDS]
# Needs a nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz --locked`).
# Panics are the findings (the code is safe Rust), so no sanitizer is built:
# coverage instrumentation only, which keeps the build of the whole service
# crate affordable on a small machine.
set -euo pipefail
target=${1:?usage: scripts/fuzz.sh TARGET [SECONDS]}
seconds=${2:-60}
here=$(cd "$(dirname "$0")/.." && pwd)
export CARGO_TARGET_DIR=${CHRONICLE_FUZZ_TARGET_DIR:-$HOME/.cache/chronicle/fuzz-target}
cd "$here/fuzz"
mkdir -p "corpus/$target" artifacts
exec cargo +nightly fuzz run --sanitizer none --release --debug-assertions "$target" "corpus/$target" \
    -- -max_total_time="$seconds" -rss_limit_mb=2048 -max_len=65536
