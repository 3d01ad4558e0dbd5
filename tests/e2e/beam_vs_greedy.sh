#!/usr/bin/env bash
# Acceptance check 3 of #7 on a small trained Transformer: beam search of
# width 1 gives exactly the greedy translations, and width 4 is never worse in
# model log-probability (alpha 0) than greedy on any held-out pair. Also: eval
# prints corpus BLEU, and --dump writes a named output per pair.
# usage: beam_vs_greedy.sh TFMC TRANSFORMER.tfm DATA_DIR WORKDIR
set -eu
tfmc=$1 model=$2 data=$3 work=$4
rm -rf "$work" && mkdir -p "$work"
"$tfmc" build "$model" --variant small -D d_model=32 -D d_ff=64 -D layers=1 -D heads=2 \
  -o "$work/tr"
bin=$work/tr
"$bin" train --data "$data/train.tsv" --steps 300 --log-every 100 --save "$work/ck.safetensors" \
  > "$work/train.log"
head -n 200 "$data/test.tsv" > "$work/test.tsv"
run() { "$bin" translate --load "$work/ck.safetensors" --test "$work/test.tsv" --scores "$@"; }
run > "$work/greedy.txt"
run --beam 1 > "$work/beam1.txt"
run --beam 4 > "$work/beam4.txt"
fail=0
if cmp -s "$work/greedy.txt" "$work/beam1.txt"; then
  echo "ok: --beam 1 output is the greedy output (translations and scores)"
else
  echo "FAIL: --beam 1 differs from greedy:"; diff "$work/greedy.txt" "$work/beam1.txt" | head; fail=1
fi
logp() { sed -n 's/.*\[logp \([^,]*\), score .*/\1/p' "$1"; }
paste <(logp "$work/greedy.txt") <(logp "$work/beam4.txt") | awk '
  { n++; if ($2 < $1 - 1e-6) { worse++; print "worse at pair " n ": greedy " $1 ", beam 4 " $2 }
    if ($2 > $1 + 1e-6) better++ }
  END { if (n != 200) { print "FAIL: " n " scores, want 200"; exit 1 }
        if (worse) { print "FAIL: beam 4 worse than greedy on " worse " pairs"; exit 1 }
        print "ok: beam 4 >= greedy in log P on all " n " pairs (better on " better + 0 ")" }' || fail=1
# eval: exact match and a BLEU line; beam 4 with a length penalty runs too.
"$bin" eval --load "$work/ck.safetensors" --test "$work/test.tsv" --beam 4 --alpha 0.6 \
  > "$work/eval.txt"
if grep -q '^exact match: ' "$work/eval.txt" &&
   grep -Eq '^bleu [0-9]+\.[0-9]{2} \([0-9.]+/[0-9.]+/[0-9.]+/[0-9.]+, bp [0-9.]+, ratio [0-9.]+, hyp_len [0-9]+, ref_len [0-9]+\)$' "$work/eval.txt"; then
  echo "ok: eval: $(grep '^bleu' "$work/eval.txt")"
else
  echo "FAIL: eval output lacks the exact-match or bleu line:"; tail -n 3 "$work/eval.txt"; fail=1
fi
# --dump logits: one tensor per pair, [tgt_len, vocab], in a safetensors file.
"$bin" translate --load "$work/ck.safetensors" --test "$work/test.tsv" --dump logits \
  --dump-file "$work/dump.safetensors" > "$work/dump.txt"
if grep -q "dumped 'logits' of 200 pairs" "$work/dump.txt" &&
   head -c 1000000 "$work/dump.safetensors" | grep -aq '"logits.199":{"dtype":"F32","shape":\[8,48\]'; then
  echo "ok: --dump logits wrote 200 tensors of [8, 48]"
else
  echo "FAIL: --dump: $(tail -n 1 "$work/dump.txt")"; fail=1
fi
if "$bin" translate --load "$work/ck.safetensors" --test "$work/test.tsv" --dump nothing \
     --dump-file "$work/x.safetensors" 2> "$work/err.txt" >/dev/null; then
  echo "FAIL: --dump of a missing output succeeded"; fail=1
elif grep -q "no output 'nothing'" "$work/err.txt"; then
  echo "ok: $(cat "$work/err.txt")"
else
  echo "FAIL: unclear refusal: $(cat "$work/err.txt")"; fail=1
fi
exit $fail
