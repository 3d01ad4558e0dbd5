#!/usr/bin/env bash
# The main job at full length: the small Transformer reaches at least 95%
# exact match on the 1000 held-out pairs of examples/numbers.
# usage: numbers_accuracy.sh TFMC TRANSFORMER.tfm DATA_DIR WORKDIR
set -eu
tfmc=$1 model=$2 data=$3 work=$4
rm -rf "$work" && mkdir -p "$work"
"$tfmc" build "$model" --variant small -o "$work/transformer" -v
"$work/transformer" train --data "$data/train.tsv" --test "$data/test.tsv" --steps 2500 \
  --log-every 500 --save "$work/ck.safetensors" | tee "$work/log"
awk '/^exact match:/ { split($5, p, "%"); ok = p[1] >= 95.0; found = 1 }
     END { if (!found) { print "FAIL: no accuracy line"; exit 1 }
           if (!ok) { print "FAIL: below 95%"; exit 1 } print "ok: at least 95%" }' "$work/log"
