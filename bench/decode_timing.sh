#!/usr/bin/env bash
# Issue #27's check of the decode-step graph: the time per new token of
# gpt (default width, seq_len 1024, batch 1) after a prompt of 10 and of
# 1000 characters, with the key/value cache and with --recompute (the
# window recomputed through the forward graph). Prints both and says whether
# prefix 1000 is within 1.5x of prefix 10.
# Then the peer, in the same run: Hugging Face transformers' greedy
# `generate` (use_cache=True) of a GPT-2 of the same size with random
# weights under PyTorch 2.x (bench/hf_decode.py, 2 threads as tfm here, the
# best of 3 runs of 20 new tokens, the same prefix lengths in tokens: tfm's
# gpt reads characters), and the ratio tfm / transformers. The two models'
# parameter counts must be equal. The peer comes from the virtual
# environment of bench/bench_venv.sh (TFM_BENCH_VENV, or build-bench-venv/
# made on first use); without transformers there it is skipped, saying so.
# Not a test: machines here are noisy, so it is run by hand and its figures
# go to bench/RESULTS.md.
#   usage: bench/decode_timing.sh [BUILD_DIR]   (default: build)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
here=$root/bench
build=$(cd "${1:-$root/build}" && pwd)
tfmc=$build/compiler/tfmc
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck source=bench/bench_venv.sh
. "$here/bench_venv.sh"

echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
# decode.sh exits 1 when prefix 1000 costs more than 1.5x prefix 10; its
# figures still stand and the peer still runs.
status=0
"$root/tests/e2e/decode.sh" "$tfmc" "$root/models/gpt.tfm" \
  "$build/examples/textlm/corpus.txt" "$build/decode_timing" timing | tee "$work/tfm.out" || status=$?
read -r short long < <(sed -n 's/^ms per new token: prefix 10: \([0-9.]*\), prefix 1000: \([0-9.]*\)$/\1 \2/p' "$work/tfm.out") ||
  { echo "decode_timing.sh: no per-token times from tests/e2e/decode.sh" >&2; exit 1; }

if ! "$venv/bin/python" -c 'import torch, transformers' >/dev/null 2>&1; then
  echo "skipped the transformers peer: no torch and transformers in $venv"
  exit "$status"
fi
params=$("$tfmc" stats "$root/models/gpt.tfm" -D seq_len=1024 -D batch=1 | awk '$1 == "total" { gsub(",", "", $2); print $2 }')
"$venv/bin/python" -c 'import torch, transformers; print("peer: transformers", transformers.__version__, "torch", torch.__version__)'
hf() { # PREFIX -> the peer's ms per new token; checks its parameter count
  "$venv/bin/python" "$here/hf_decode.py" "$1" 20 3 2 >"$work/hf.out" 2>&1 ||
    { tail -n 20 "$work/hf.out" >&2; echo "decode_timing.sh: hf_decode.py failed" >&2; return 1; }
  local n
  n=$(sed -n 's/^hf params \([0-9]*\)$/\1/p' "$work/hf.out")
  [ "$n" = "$params" ] || { echo "decode_timing.sh: the peer has ${n:-an unknown number of} parameters, tfm's gpt $params: not the same model" >&2; return 1; }
  sed -n 's/^prefix [0-9]*: \([0-9.]*\) ms per new token$/\1/p' "$work/hf.out"
}
hf_short=$(hf 10) hf_long=$(hf 1000)
echo "transformers generate (greedy, use_cache=True), $params parameters as tfm's: prefix 10: $hf_short, prefix 1000: $hf_long ms per new token"
awk -v a="$short" -v b="$hf_short" -v c="$long" -v d="$hf_long" \
  'BEGIN { printf "ratio tfm cache / transformers: prefix 10: %.3g, prefix 1000: %.3g\n", a / b, c / d }'
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
exit "$status"
