#!/usr/bin/env bash
# Builds everything and runs the main job: check the base Transformer of
# "Attention Is All You Need" and print its parameters per layer.
# usage: tools/main.sh            (from the repository root or anywhere)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/tools/deps.sh"
tfm_install_deps
build=$root/build
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release > "$build.configure.log" 2>&1 ||
  { cat "$build.configure.log"; exit 1; }
cmake --build "$build" -j "$(tfm_jobs)"
tfmc=$build/compiler/tfmc
echo
echo "== tfmc check models/transformer.tfm"
"$tfmc" check "$root/models/transformer.tfm"
echo
echo "== tfmc stats models/transformer.tfm (per layer)"
"$tfmc" stats "$root/models/transformer.tfm" | grep -v '^      '
echo
echo "== tfmc check models/gpt.tfm"
"$tfmc" check "$root/models/gpt.tfm"
