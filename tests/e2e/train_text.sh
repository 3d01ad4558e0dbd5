#!/usr/bin/env bash
# The compiled GPT trains on text: the loss falls, a checkpoint and its
# vocabulary are written, and generate/info/--help work.
# usage: train_text.sh BINARY CORPUS WORKDIR
set -eu
bin=$1 corpus=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
"$bin" --help | grep -q "train the model"
"$bin" info | grep -q "param  wte.table"
"$bin" train --data "$corpus" --steps 60 --log-every 10 --save "$work/ck.safetensors" > "$work/log"
cat "$work/log"
first=$(awk '/^step 1\// { print $4 }' "$work/log")
last=$(awk '/^step 60\// { print $4 }' "$work/log")
awk -v a="$first" -v b="$last" 'BEGIN { if (!(b < a)) { print "FAIL: loss " a " -> " b; exit 1 } }'
test -s "$work/ck.safetensors" && test -s "$work/ck.safetensors.vocab"
"$bin" eval --load "$work/ck.safetensors" --test "$corpus" | grep -q "^held-out loss: [0-9]"
"$bin" generate --load "$work/ck.safetensors" --prompt "the " --length 20 > "$work/generated"
test "$(head -c 4 "$work/generated")" = "the "
echo "ok: loss $first -> $last; eval and generate ran"
