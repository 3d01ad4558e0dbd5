#!/usr/bin/env bash
# A corpus larger than the memory a run may use: a 210 MB token shard
# (105M ids of a 1024-id vocabulary, written straight from C by shard_gen)
# trains models/gpt.tfm with peak resident memory far below its size, and a
# run killed with SIGKILL from outside at an unknown step resumes from its
# last checkpoint to the very losses and bits of an uninterrupted run.
# usage: shards_big.sh TFMC GPT_TFM SHARD_GEN WORKDIR
set -u
tfmc=$1 model=$2 gen=$3 work=$4
[ -x /usr/bin/time ] || { echo "skipped: /usr/bin/time (GNU time) is not installed"; exit 77; }
rm -rf "$work" && mkdir -p "$work"
trap 'rm -f "$work/big.tokshard"' EXIT
"$tfmc" build "$model" -D vocab=1024 -D layers=1 -D d_model=64 -D heads=2 -D seq_len=32 -D batch=4 \
  -o "$work/gpt" || exit 1
"$gen" "$work/big.tokshard" 1024 105000000 3 || exit 1
size=$(stat -c %s "$work/big.tokshard")
[ "$size" -ge 200000000 ] || { echo "FAIL: the corpus has only $size bytes"; exit 1; }
fail=0
steps=3000
common=(train --data "$work/big.tokshard" --steps $steps --every 250 --seed 5 --log-every 1 --threads 1)
peak_kb() { sed -n 's/.*Maximum resident set size (kbytes): //p' "$1"; }
/usr/bin/time -v "$work/gpt" "${common[@]}" --save "$work/straight.safetensors" \
  --metrics "$work/straight.jsonl" > "$work/straight.log" 2> "$work/straight.time" ||
  { echo "FAIL: training"; cat "$work/straight.log" "$work/straight.time"; exit 1; }
straight_kb=$(peak_kb "$work/straight.time")

# The same run, killed from outside once it is past step 1100.
"$work/gpt" "${common[@]}" --save "$work/resumed.safetensors" --metrics "$work/killed.jsonl" > /dev/null &
pid=$!
for _ in $(seq 1 600); do
  last=$(tail -n 1 "$work/killed.jsonl" 2>/dev/null | sed -n 's/.*"step":\([0-9]*\),.*/\1/p')
  [ -n "$last" ] && [ "$last" -ge 1100 ] && break
  sleep 0.1
done
kill -9 "$pid"
wait "$pid"
status=$?
last=$(tail -n 1 "$work/killed.jsonl" | sed -n 's/.*"step":\([0-9]*\),.*/\1/p')
[ "$status" -eq 137 ] && [ "$last" -lt "$steps" ] ||
  { echo "FAIL: the run was not killed mid-run (status $status, last step $last)"; exit 1; }
/usr/bin/time -v "$work/gpt" "${common[@]}" --save "$work/resumed.safetensors" --resume \
  --metrics "$work/resumed.jsonl" > "$work/resumed.log" 2> "$work/resumed.time" ||
  { echo "FAIL: resuming"; cat "$work/resumed.log" "$work/resumed.time"; exit 1; }
resumed_kb=$(peak_kb "$work/resumed.time")
from=$(sed -n 's/^resuming from .* at step \([0-9]*\)$/\1/p' "$work/resumed.log")
losses() { sed -n 's/.*"step":\([0-9]*\),"loss":\([^,]*\),.*/\1 \2/p' "$1" | awk -v from="$2" '$1 > from'; }
compared=$(losses "$work/resumed.jsonl" "${from:-0}" | wc -l)
if [ -n "$from" ] && [ "$compared" -eq $((steps - from)) ] &&
   [ "$(losses "$work/straight.jsonl" "$from")" = "$(losses "$work/resumed.jsonl" "$from")" ] &&
   cmp -s "$work/straight.safetensors" "$work/resumed.safetensors"; then
  echo "ok: killed (SIGKILL) after step $last, resumed from step $from: the losses of steps" \
       "$((from + 1))-$steps and the final checkpoint are bit-identical to the uninterrupted run"
else
  echo "FAIL: the resumed run (from step ${from:-?}) differs from the uninterrupted one"
  diff <(losses "$work/straight.jsonl" "${from:-0}") <(losses "$work/resumed.jsonl" "${from:-0}") | head
  fail=1
fi
first=$(sed -n 's/^step 1\/.*loss \([0-9.]*\).*/\1/p' "$work/straight.log")
final=$(sed -n "s/^step $steps\/.*loss \([0-9.]*\).*/\1/p" "$work/straight.log")
echo "corpus: $size bytes; loss $first at step 1, $final at step $steps"
echo "peak RSS (VmHWM, /usr/bin/time -v): uninterrupted run ${straight_kb} kB, resumed run ${resumed_kb} kB"
# Well under the corpus: at most 64 MB (a tenth of it would be 21 MB; the
# binary and its model need about 6).
for kb in "$straight_kb" "$resumed_kb"; do
  [ "$kb" -lt 65536 ] || { echo "FAIL: peak RSS $kb kB for a corpus of $size bytes"; fail=1; }
done
exit $fail
