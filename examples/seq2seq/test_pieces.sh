#!/usr/bin/env bash
# The pieces of the seq2seq experiment, quickly:
#   test_pieces.sh data GEN DIR   the generator is deterministic (same seed:
#       same bytes; another seed: other training pairs, the same test pairs; no
#       source in both files)
#   test_pieces.sh train TFMC GEN ATTENTION DIR   each of the four models builds
#       and a short training run brings its loss below a threshold; the
#       Transformer's cross-attention dump is read back by the viewer
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mode=$1
fail() { echo "FAIL: $*" >&2; exit 1; }

if [ "$mode" = data ]; then
  gen=$2 dir=$3
  mkdir -p "$dir/s1" "$dir/s1b" "$dir/s2"
  "$gen" "$dir/s1" --train 2000 --test 200
  "$gen" "$dir/s1b" --train 2000 --test 200
  "$gen" "$dir/s2" --seed 2 --train 2000 --test 200
  cmp -s "$dir/s1/train.tsv" "$dir/s1b/train.tsv" || fail "seed 1 twice gives different train.tsv"
  cmp -s "$dir/s1/test.tsv" "$dir/s1b/test.tsv" || fail "seed 1 twice gives different test.tsv"
  cmp -s "$dir/s1/test.tsv" "$dir/s2/test.tsv" || fail "the test set depends on the seed"
  cmp -s "$dir/s1/train.tsv" "$dir/s2/train.tsv" && fail "seeds 1 and 2 give the same train.tsv"
  [ "$(wc -l < "$dir/s1/train.tsv")" = 2000 ] || fail "train.tsv does not have 2000 lines"
  overlap=$(cut -f1 "$dir/s1/train.tsv" "$dir/s1/test.tsv" | sort | uniq -d | wc -l)
  [ "$overlap" = 0 ] || fail "$overlap sources are in both files or twice in one"
  # Every rule on a known line: keep, rotate, swap (dictionary w -> 7w + 5 mod 24).
  awk -F'\t' '{ n = split($1, s, " "); m = split($2, t, " ");
                if (m != n - 1 || (s[1] != "keep" && s[1] != "rotate" && s[1] != "swap")) bad++ }
              END { exit bad > 0 }' "$dir/s1/train.tsv" || fail "a pair breaks the format"
  longest=$(awk -F'\t' '{ n = split($1, s, " "); if (n > m) m = n } END { print m }' "$dir/s1/train.tsv")
  [ "$longest" -le 25 ] || fail "a source has $longest words (the models have src_len 25)"
  echo "ok: generator deterministic, test set fixed, no overlap"
  exit 0
fi

tfmc=$2 gen=$3 attention=$4 dir=$5
mkdir -p "$dir"
"$gen" "$dir" --train 2000 --test 32
check() { # name, threshold, build arguments...
  local name=$1 below=$2
  shift 2
  "$tfmc" build "$@" -o "$dir/$name"
  "$dir/$name" train --data "$dir/train.tsv" --steps 60 --log-every 20 --threads 2 \
    --save "$dir/$name.ckpt" > "$dir/$name.log"
  local loss
  loss=$(grep '^step' "$dir/$name.log" | tail -1 | awk '{print $4}')
  awk -v l="$loss" -v b="$below" 'BEGIN { exit !(l < b) }' || fail "$name: loss $loss after 60 steps, not below $below"
  echo "ok: $name loss $loss after 60 steps (below $below)"
}
# The loss starts near ln(56) = 4.03 for the RNNs, near 5.5 for the
# Transformers (tied embeddings: the output layer is the input table).
check transformer_all 3.5 "$here/transformer.tfm" -D warmup=30
check transformer_first 3.5 "$here/transformer.tfm" -D warmup=30 -D memory=first
check lstm 3.2 "$here/rnn.tfm"
check gru_additive 3.2 "$here/rnn.tfm" --variant gru_additive
# The viewer on a real dump: one block per pair, the 8 heads averaged; a checkpoint is refused.
head -2 "$dir/test.tsv" > "$dir/pairs.tsv"
"$dir/transformer_all" translate --load "$dir/transformer_all.ckpt" --test "$dir/pairs.tsv" \
  --dump cross_attention --dump-file "$dir/attention.safetensors" > /dev/null
"$attention" "$dir/attention.safetensors" > "$dir/attention.txt"
[ "$(grep -c '^pair ' "$dir/attention.txt")" = 2 ] || fail "the viewer did not show 2 pairs"
grep -q 'mean over 8 heads' "$dir/attention.txt" || fail "the viewer did not average 8 heads"
"$attention" "$dir/transformer_all.ckpt" 2> "$dir/attention.err" && fail "the viewer read a checkpoint as a dump"
grep -q 'not written by translate --dump' "$dir/attention.err" || fail "the viewer's refusal: $(cat "$dir/attention.err")"
echo "ok: attention dump of the Transformer shown for 2 pairs"
