# Sourced by the scripts: a build directory outside the checkout, so later
# runs on the same machine are warm.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/chronicle/target}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
