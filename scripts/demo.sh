#!/usr/bin/env bash
# The demo behind `make demo`: raw files -> shards -> prepared dataset -> info, lint, batches.
set -euo pipefail
cd "$(dirname "$0")/.."
DEMO=demo-data
rm -rf "$DEMO"

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }

step python scripts/make_demo_files.py "$DEMO/raw" --count 240
step stoker pack "$DEMO/raw" "$DEMO/shards" --samples-per-shard 40 --no-progress
step stoker prepare "$DEMO/shards" --non-interactive --split-ratio 8,1,1 --no-progress \
    --sample-type CaptioningSample --field-map '{"image": "jpg", "caption": "txt"}'
step stoker info "$DEMO/shards"
step stoker lint "$DEMO/shards" --no-progress
step python scripts/demo_load.py "$DEMO/shards"
printf '\nThe prepared dataset is in %s/shards; Energon and stoker can both load it.\n' "$DEMO"
