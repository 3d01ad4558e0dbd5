#!/usr/bin/env bash
# The thread count, and which thread runs which chunk of a kernel (a thread
# that has finished takes chunks nobody started, so that depends on timing),
# never changes a result: a small GPT trained 6 steps on 1, 2, 3 and 5
# threads writes byte-identical checkpoints. The model is big enough that
# its dots span several GEMM row blocks and its attention several tiles.
# usage: threads_identical.sh TFMC MODEL CORPUS WORKDIR
set -u
tfmc=$1 model=$2 corpus=$3 work=$4
rm -rf "$work" && mkdir -p "$work"
"$tfmc" build "$model" -D vocab=80 -D d_model=64 -D heads=2 -D layers=2 -D seq_len=32 \
  -D batch=8 -o "$work/gpt" || { echo "FAIL: build"; exit 1; }
for t in 1 2 3 5; do
  "$work/gpt" train --data "$corpus" --steps 6 --log-every 6 --threads "$t" \
    --save "$work/t$t.safetensors" > /dev/null || { echo "FAIL: training on $t threads"; exit 1; }
done
fail=0
for t in 2 3 5; do
  cmp -s "$work/t1.safetensors" "$work/t$t.safetensors" ||
    { echo "FAIL: the checkpoint of $t threads differs from that of 1 thread"; fail=1; }
done
[ $fail = 0 ] && echo "checkpoints of 1, 2, 3 and 5 threads are identical"
exit $fail
