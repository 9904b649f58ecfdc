# chronicle tasks (https://github.com/casey/just). The scripts they call work without just.

set shell := ["bash", "-euo", "pipefail", "-c"]

# Ingest the bundled sample into a temporary dir and show what chronicle answers.
demo:
    scripts/demo.sh

# Every test of the workspace.
test *ARGS:
    scripts/test.sh {{ARGS}}

# Benchmarks (release build), one JSON object per line.
bench:
    source scripts/env.sh && cargo build --release -p chronicle -p chronicle-bench --features chronicle-bench/bench-broker,chronicle-bench/bench-fakes
    source scripts/env.sh && $CARGO_TARGET_DIR/release/chronicle bench log
    source scripts/env.sh && $CARGO_TARGET_DIR/release/chronicle --embedder hash bench ingest --workload ../shared/datasets/synthetic/workload.jsonl
    source scripts/env.sh && $CARGO_TARGET_DIR/release/chronicle --embedder hash bench ingest --fake-llm --workload ../shared/datasets/synthetic/workload.jsonl
    source scripts/env.sh && $CARGO_TARGET_DIR/release/chronicle bench search
    source scripts/env.sh && $CARGO_TARGET_DIR/release/chronicle --embedder hash bench scale --episodes 100000 --tenants 1000
    source scripts/env.sh && $CARGO_TARGET_DIR/release/chronicle bench recall --episodes ../shared/datasets/locomo/episodes.dev.jsonl --questions ../shared/datasets/locomo/questions.dev.jsonl
    source scripts/env.sh && $CARGO_TARGET_DIR/release/chronicle bench communities
    source scripts/env.sh && $CARGO_TARGET_DIR/release/chronicle --embedder hash bench kafka
    source scripts/env.sh && $CARGO_TARGET_DIR/release/chronicle --embedder hash bench api

# Format the code.
fmt:
    cargo fmt --all

# Lints, warnings as errors.
lint:
    source scripts/env.sh && cargo fmt --all -- --check && cargo clippy --workspace --all-targets --features chronicle-bench/bench-broker,chronicle-bench/bench-fakes -- -D warnings

# Rebuild the projection of DATA from its log.
rebuild DATA=".data":
    source scripts/env.sh && cargo run --release -p chronicle -- --data {{DATA}} rebuild

# Audit replay: the projection as known at transaction time UNTIL, into OUT.
replay UNTIL OUT DATA=".data":
    source scripts/env.sh && cargo run --release -p chronicle -- --data {{DATA}} replay --until {{UNTIL}} --out {{OUT}}

# Distributed mode with Docker: Kafka, ScyllaDB, Prometheus, Grafana and chronicle's roles.
up:
    docker compose -f infra/compose.yaml up -d

# Opt-in: chronicle's OpenAI adapter against a real tiny LLM (llama.cpp + SmolLM2); not in CI.
e2e-llm:
    scripts/e2e-llm.sh

# Fuzz one target (temporal, offline_extractor, codec, http_decode, mcp_decode) for SECONDS; needs nightly and cargo-fuzz.
fuzz TARGET SECONDS="60":
    scripts/fuzz.sh {{TARGET}} {{SECONDS}}
