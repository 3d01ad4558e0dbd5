#!/usr/bin/env bash
# Builds everything and runs the main job: compile the Transformer of
# "Attention Is All You Need" (models/transformer.tfm, its `small` variant)
# into a native binary and train it on the bundled translation task (English
# number words to digits, examples/numbers), then show held-out translations
# and the exact-match accuracy.
# usage: tools/main.sh [STEPS]     (default 2500 steps; a few minutes on 2 cores)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/tools/deps.sh"
tfm_install_deps
steps=${1:-2500}
build=$root/build
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release > "$build.configure.log" 2>&1 ||
  { cat "$build.configure.log"; exit 1; }
cmake --build "$build" -j "$(tfm_jobs)"
tfmc=$build/compiler/tfmc
data=$build/examples/numbers/data
out=$build/main-job
mkdir -p "$out"

echo
echo "== tfmc check models/transformer.tfm --variant small"
"$tfmc" check "$root/models/transformer.tfm" --variant small
echo
echo "== tfmc build models/transformer.tfm --variant small -o $out/transformer"
"$tfmc" build "$root/models/transformer.tfm" --variant small -o "$out/transformer" -v
echo
echo "== training on $(wc -l < "$data/train.tsv") pairs, evaluating on $(wc -l < "$data/test.tsv") held-out pairs"
rm -f "$out/numbers.safetensors" "$out/numbers.safetensors.vocab"
"$out/transformer" train --data "$data/train.tsv" --test "$data/test.tsv" --steps "$steps" \
  --log-every 250 --every 500 --save "$out/numbers.safetensors"
