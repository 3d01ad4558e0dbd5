#!/usr/bin/env bash
# examples/bpe/run.sh shortened: the tokenizer trains, the shards are
# written, the model learns (held-out loss well below the uniform
# log(4096) = 8.32) and generate decodes through the tokenizer.
#   usage: bpe_lm.sh BUILD_DIR WORK_DIR
set -euo pipefail
build=$1 work=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$work"
log=$(STEPS=300 OUT="$work" THREADS=2 "$root/examples/bpe/run.sh" "$build" 2>&1) ||
  { echo "$log"; echo "FAIL: run.sh exited non-zero"; exit 1; }
fail() { echo "$log" | grep -v 'tokenize \['; echo "FAIL: $*"; exit 1; }
echo "$log" | grep -q "trained a byte-level BPE tokenizer of 4000 tokens" || fail "no tokenizer"
echo "$log" | grep -q "tokenized $work/test.txt: .* 0 unknown" || fail "no held-out shard"
held=$(echo "$log" | sed -n 's/^held-out loss: \([0-9.]*\).*/\1/p')
[ -n "$held" ] || fail "no held-out loss"
awk -v l="$held" 'BEGIN { exit !(l < 7.0) }' || fail "held-out loss $held is not below 7.0"
echo "$log" | grep -A1 -- "--- a continuation" | tail -1 | grep -q "^The compiler" ||
  fail "generate did not continue the prompt"
grep -c '"step"' "$work/metrics.jsonl" > /dev/null || fail "no metrics"
# Bad input: a broken tokenizer, one larger than the model's vocabulary,
# a train without its corpus.
refused() { # WHAT EXPECTED_EXIT MESSAGE COMMAND...
  local what=$1 code=$2 message=$3; shift 3
  local got status=0
  got=$("$@" 2>&1) || status=$?
  [ "$status" = "$code" ] && echo "$got" | grep -qF -- "$message" ||
    fail "$what: exit $status, expected $code and '$message': $got"
}
head -c 300 "$work/tokenizer.json" > "$work/broken.json"
refused "a truncated tokenizer.json" 1 "$work/broken.json:" \
  "$work/gpt" tokenize --tokenizer "$work/broken.json" --data "$work/test.txt" --out "$work/x.tokshard"
"$work/gpt" tokenizer train --vocab-size 5000 --out "$work/big.json" "$work/train.txt" > /dev/null
refused "a tokenizer larger than the model" 1 "rebuild with -D vocab=" \
  "$work/gpt" tokenize --tokenizer "$work/big.json" --data "$work/test.txt" --out "$work/x.tokshard"
refused "tokenizer train without files" 2 "tokenizer train needs the corpus" \
  "$work/gpt" tokenizer train --vocab-size 500 --out "$work/t.json"
refused "an unknown tokenizer verb" 2 "tokenizer: say train or encode" "$work/gpt" tokenizer fit
echo "bpe_lm: held-out loss $held after 300 steps; bad input refused"
