#!/usr/bin/env bash
# --dtype bf16 end to end: the tiny GPT (the e2e fixture's config) built
# with bf16 activations trains like the f32 build, its checkpoints hold f32
# parameters (the f32 binary evaluates them), and tfmc stats plans a
# smaller training peak for the default gpt.tfm.
# usage: bf16_train.sh TFMC GPT.TFM F32_BINARY CORPUS WORKDIR -D ... (the fixture's config)
set -eu
tfmc=$1 model=$2 f32=$3 corpus=$4 work=$5
shift 5
rm -rf "$work" && mkdir -p "$work"
"$tfmc" --help | grep -q -- "--dtype D"
"$tfmc" build "$model" "$@" --dtype bf16 -o "$work/gpt_bf16"

steps=60
"$f32" train --data "$corpus" --steps $steps --log-every 10 > "$work/f32.log"
"$work/gpt_bf16" train --data "$corpus" --steps $steps --log-every 10 \
  --save "$work/ck.safetensors" > "$work/bf16.log"
paste "$work/f32.log" "$work/bf16.log" | grep '^step' || true
loss() { awk -v s="$2/$steps" '$1 == "step" && $2 == s { print $4 }' "$1"; }
f1=$(loss "$work/f32.log" 1) fn=$(loss "$work/f32.log" $steps)
b1=$(loss "$work/bf16.log" 1) bn=$(loss "$work/bf16.log" $steps)
# Tolerances: bf16 keeps 8 bits of mantissa, so the step-1 loss (the
# forward pass alone) may move by a few 1e-3; after 60 steps the two runs
# have drifted apart by rounding but must have learned as much: the final
# losses within 0.02 (half a percent of ln 80) and the bf16 run's decrease
# at least 3/4 of the f32 run's.
awk -v f1="$f1" -v fn="$fn" -v b1="$b1" -v bn="$bn" 'BEGIN {
  d = b1 - f1; if (d < 0) d = -d
  e = bn - fn; if (e < 0) e = -e
  if (!(bn < b1)) { print "FAIL: bf16 loss did not fall: " b1 " -> " bn; exit 1 }
  if (!(d <= 0.01)) { print "FAIL: step 1 loss bf16 " b1 " vs f32 " f1; exit 1 }
  if (!(e <= 0.02)) { print "FAIL: step '$steps' loss bf16 " bn " vs f32 " fn; exit 1 }
  if (!(b1 - bn >= 0.75 * (f1 - fn))) { print "FAIL: bf16 fell " b1 - bn ", f32 " f1 - fn; exit 1 }
}'

# Checkpoints keep f32 parameters: no BF16 tensor in the safetensors header,
# and the f32 build of the same model evaluates the bf16 run's checkpoint.
header=$(head -c 65536 "$work/ck.safetensors" | tr -d '\0' | head -c 60000)
case "$header" in *'"BF16"'*) echo "FAIL: a BF16 tensor in the checkpoint"; exit 1 ;; esac
case "$header" in *'"F32"'*) ;; *) echo "FAIL: no F32 tensor in the checkpoint"; exit 1 ;; esac
"$f32" eval --load "$work/ck.safetensors" --test "$corpus" | grep -q "^held-out loss: [0-9]"

# The planned training peak is smaller (the model's own config: the tiny
# one's peak is a fraction of a MiB).
peak() { "$tfmc" stats "$model" "$@" | awk '$1 == "train" { print $NF }'; }
p32=$(peak) p16=$(peak --dtype bf16)
awk -v a="$p32" -v b="$p16" 'BEGIN { if (!(b < a)) { print "FAIL: peak f32 " a " MiB, bf16 " b; exit 1 } }'
echo "ok: loss f32 $f1 -> $fn, bf16 $b1 -> $bn; checkpoint f32; train peak $p32 -> $p16 MiB"
