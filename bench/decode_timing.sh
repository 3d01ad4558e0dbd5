#!/usr/bin/env bash
# Issue #27's check of the decode-step graph: the time per new token of
# gpt (default width, seq_len 1024, batch 1) after a prompt of 10 and of
# 1000 characters, with the key/value cache and with --recompute (the
# window recomputed through the forward graph: the peer this replaces).
# Prints both and says whether prefix 1000 is within 1.5x of prefix 10.
# Not a test: machines here are noisy, so it is run by hand and its figures
# go to bench/RESULTS.md.
#   usage: bench/decode_timing.sh [BUILD_DIR]   (default: build)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
exec "$root/tests/e2e/decode.sh" "$build/compiler/tfmc" "$root/models/gpt.tfm" \
  "$build/examples/textlm/corpus.txt" "$build/decode_timing" timing
