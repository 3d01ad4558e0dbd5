#!/usr/bin/env bash
# Token shards through a built binary: tokenize a text (one file, and a
# folder of shards), train and eval on them, kill and --resume to the same
# bits and the same per-step losses, and refuse bad shards with
# "FILE: reason" and exit status 1.
# usage: shards.sh BINARY CORPUS WORKDIR   (BINARY: gpt with vocab=80)
set -u
bin=$1 corpus=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
fail=0
"$bin" tokenize --data "$corpus" --out "$work/one.tokshard" > "$work/tok.log" 2> "$work/tok.err" ||
  { echo "FAIL: tokenize"; cat "$work/tok.log" "$work/tok.err"; exit 1; }
grep -q "tokenize \[#*\] 100%" "$work/tok.err" || { echo "FAIL: no progress bar"; cat "$work/tok.err"; fail=1; }
"$bin" tokenize --data "$corpus" --out "$work/dir" --shard-size 10000 > "$work/tok2.log" 2>/dev/null ||
  { echo "FAIL: tokenize --shard-size"; cat "$work/tok2.log"; exit 1; }
n=$(ls "$work/dir"/*.tokshard | wc -l)
bytes=$(stat -c %s "$corpus")
if [ "$n" -eq $(( (bytes + 9999) / 10000 )) ] && [ -f "$work/dir/vocab" ] && [ -f "$work/one.tokshard.vocab" ]; then
  echo "ok: $n shards of 10000 tokens for $bytes bytes, vocabularies beside them"
else
  echo "FAIL: $n shards for $bytes bytes"; ls -la "$work" "$work/dir"; fail=1
fi
cat "$work/tok.log"

common=(train --data "$work/dir" --steps 40 --every 10 --seed 7 --log-every 1)
"$bin" "${common[@]}" --save "$work/straight.safetensors" --metrics "$work/straight.jsonl" > /dev/null || exit 1
TFM_TEST_KILL_AT_STEP=25 "$bin" "${common[@]}" --save "$work/resumed.safetensors" > /dev/null
status=$?
[ "$status" -eq 137 ] || { echo "FAIL: the run was not killed (status $status)"; exit 1; }
"$bin" "${common[@]}" --save "$work/resumed.safetensors" --resume --metrics "$work/resumed.jsonl" > "$work/log" || exit 1
grep -q "resuming from .* at step 20" "$work/log" || { echo "FAIL: did not resume from step 20"; cat "$work/log"; exit 1; }
losses() { sed -n 's/.*"step":\([0-9]*\),"loss":\([^,]*\),.*/\1 \2/p' "$1" | awk -v from="$2" '$1 > from'; }
if cmp -s "$work/straight.safetensors" "$work/resumed.safetensors" &&
   [ "$(losses "$work/straight.jsonl" 20)" = "$(losses "$work/resumed.jsonl" 20)" ] &&
   [ "$(losses "$work/resumed.jsonl" 20 | wc -l)" -eq 20 ]; then
  echo "ok: killed at step 25 and resumed from 20: losses of steps 21-40 and the checkpoint bit-identical"
else
  echo "FAIL: resumed run differs"; diff <(losses "$work/straight.jsonl" 20) <(losses "$work/resumed.jsonl" 20); fail=1
fi
cmp -s "$work/dir/vocab" "$work/straight.safetensors.vocab" || { echo "FAIL: vocabulary not beside the checkpoint"; fail=1; }

# The same shards as one file and as a pattern; eval; --metrics with --test shards.
"$bin" train --data "$work/dir/*.tokshard" --steps 40 --every 10 --seed 7 --log-every 40 \
  --save "$work/glob.safetensors" > /dev/null || { echo "FAIL: train on a pattern"; fail=1; }
cmp -s "$work/straight.safetensors" "$work/glob.safetensors" || { echo "FAIL: a pattern trains differently from its folder"; fail=1; }
"$bin" train --data "$work/one.tokshard" --test "$work/dir/00003.tokshard" --steps 10 --log-every 5 \
  --metrics "$work/m.jsonl" > /dev/null || { echo "FAIL: train --test shards"; fail=1; }
grep -q '"test_loss":[0-9]' "$work/m.jsonl" || { echo "FAIL: no test_loss"; cat "$work/m.jsonl"; fail=1; }
out=$("$bin" eval --load "$work/straight.safetensors" --test "$work/one.tokshard") &&
  printf '%s\n' "$out" | grep -q "held-out loss: [0-9]" && echo "ok: eval: $out" || { echo "FAIL: eval: $out"; fail=1; }

refused() { # name expected-words command...
  local name=$1 words=$2 out status
  shift 2
  out=$("$@" 2>&1 >/dev/null)
  status=$?
  if [ "$status" -eq 1 ] && printf '%s' "$out" | grep -q "$words"; then
    echo "ok: $name: $out"
  else
    echo "FAIL: $name: status $status, message: $out"
    fail=1
  fi
}
train=("$bin" train --steps 2)
printf 'this is not a token shard, only some words of text at all' > "$work/magic.tokshard"
refused "wrong magic" "magic.tokshard: not a token shard (wrong magic" "${train[@]}" --data "$work/magic.tokshard"
head -c 1000 "$work/one.tokshard" > "$work/cut.tokshard"
refused truncated "cut.tokshard: truncated" "${train[@]}" --data "$work/cut.tokshard"
head -c 40 "$work/one.tokshard" > "$work/short.tokshard"
refused "truncated header" "short.tokshard: truncated: 40 bytes" "${train[@]}" --data "$work/short.tokshard"
# Hand-made shards (python3 writes the header and its CRC).
make_shard() { # path vocab id count version
  python3 - "$@" <<'PY'
import struct, sys, zlib
path, vocab, ident, count, version = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
head = b"TFMTOK1\0" + struct.pack("<IIQQQ", version, 2, vocab, count, 0) + bytes(20)
ids = struct.pack("<%dH" % count, *([ident] * count))
open(path, "wb").write(head + struct.pack("<I", zlib.crc32(head)) + ids + bytes(-len(ids) % 8))
PY
}
make_shard "$work/beyond.tokshard" 80 85 200 1
refused "ids beyond the vocabulary" "beyond.tokshard: token [0-9]* is id 85, not below the vocabulary of 80" \
  "${train[@]}" --data "$work/beyond.tokshard"
make_shard "$work/vocab81.tokshard" 81 5 200 1
refused "another vocabulary" "vocab81.tokshard: vocabulary of 81 ids, but the model's is 80" \
  "${train[@]}" --data "$work/vocab81.tokshard"
make_shard "$work/v2.tokshard" 80 5 200 2
refused "version" "v2.tokshard: token shard version 2" "${train[@]}" --data "$work/v2.tokshard"
refused "eval on a bad shard" "magic.tokshard: not a token shard" \
  "$bin" eval --load "$work/straight.safetensors" --test "$work/magic.tokshard"
mkdir -p "$work/none"
refused "empty folder" "none: no token shards" "${train[@]}" --data "$work/none"
exit $fail
