#!/usr/bin/env bash
# A GPT on a BPE-tokenised corpus through token shards (docs/data.md): the
# text is this repository's documentation (shipped with every clone); the
# binary trains a byte-level BPE tokenizer on its first 90% (GPT-2's kind,
# written as Hugging Face's tokenizer.json), tokenises both parts into
# shards, trains models/gpt.tfm on them with the held-out loss logged,
# evaluates and continues a prompt.
#   usage: examples/bpe/run.sh [BUILD_DIR]   (default: build)
# Environment: STEPS (default 1500), VOCAB (tokenizer size, default 4000),
# THREADS (default 2), OUT (default BUILD_DIR/bpe_run).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
tfmc=$build/compiler/tfmc
out=${OUT:-$build/bpe_run}
steps=${STEPS:-1500}
vocab=${VOCAB:-4000}
threads=${THREADS:-2}
[ -x "$tfmc" ] || { echo "run.sh: $tfmc is missing; build the project first" >&2; exit 2; }
mkdir -p "$out"

# The corpus: every Markdown file of the repository, in a fixed order; the
# last 10% of its lines are held out.
find "$root" -name '*.md' -not -path '*/build*' -not -path '*/.git/*' | LC_ALL=C sort |
  xargs cat > "$out/corpus.txt"
lines=$(wc -l < "$out/corpus.txt")
head -n $((lines * 9 / 10)) "$out/corpus.txt" > "$out/train.txt"
tail -n +$((lines * 9 / 10 + 1)) "$out/corpus.txt" > "$out/test.txt"
echo "corpus: $(wc -c < "$out/train.txt") bytes to train on, $(wc -c < "$out/test.txt") held out"

# The model's vocabulary must hold the tokenizer's ids: 4096 >= 4000.
"$tfmc" build "$root/models/gpt.tfm" -D vocab=$(( (vocab + 255) / 256 * 256 )) -D layers=2 \
  -D d_model=128 -D heads=4 -D seq_len=64 -D batch=16 -o "$out/gpt"
"$out/gpt" tokenizer train --vocab-size "$vocab" --out "$out/tokenizer.json" "$out/train.txt"
for part in train test; do
  "$out/gpt" tokenize --tokenizer "$out/tokenizer.json" --data "$out/$part.txt" \
    --out "$out/$part.tokshard"
done
"$out/gpt" train --data "$out/train.tokshard" --test "$out/test.tokshard" --steps "$steps" \
  --log-every 100 --save "$out/gpt.ckpt" --metrics "$out/metrics.jsonl" --threads "$threads"
"$out/gpt" eval --load "$out/gpt.ckpt" --test "$out/test.tokshard" --threads "$threads"
echo "--- a continuation (greedy):"
"$out/gpt" generate --load "$out/gpt.ckpt" --tokenizer "$out/tokenizer.json" \
  --prompt "The compiler" --length 40 --threads "$threads"
echo "curves: python3 $root/tools/report.py $out/metrics.jsonl -o $out/curves.html"
