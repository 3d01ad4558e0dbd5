#!/usr/bin/env bash
# Truncated, bit-flipped and wrong-model checkpoints are refused with a
# message naming the file and exit status 1, never a crash.
# usage: bad_checkpoints.sh BINARY CORPUS WORKDIR OTHER_WRITER
# (OTHER_WRITER writes a valid checkpoint of some other model.)
set -u
bin=$1 corpus=$2 work=$3 other=$4
rm -rf "$work" && mkdir -p "$work"
"$bin" train --data "$corpus" --steps 2 --save "$work/good.safetensors" > /dev/null || exit 1
size=$(stat -c %s "$work/good.safetensors")
fail=0
refused() { # name file expected-words
  local name=$1 file=$2 words=$3 out status
  cp "$work/good.safetensors.vocab" "$file.vocab"
  out=$("$bin" generate --load "$file" --length 1 2>&1 >/dev/null)
  status=$?
  if [ "$status" -eq 1 ] && printf '%s' "$out" | grep -q "$file" && printf '%s' "$out" | grep -qi "$words"; then
    echo "ok: $name: $out"
  else
    echo "FAIL: $name: status $status, message: $out"
    fail=1
  fi
}
head -c $((size / 2)) "$work/good.safetensors" > "$work/truncated.safetensors"
refused truncated "$work/truncated.safetensors" "trunc\|short\|end"
cp "$work/good.safetensors" "$work/flipped.safetensors"
# Flip one bit in the tensor data (past the header).
off=$((size - 100))
byte=$(od -An -tu1 -j "$off" -N1 "$work/flipped.safetensors" | tr -d ' ')
printf "$(printf '\\%03o' $((byte ^ 16)))" | dd of="$work/flipped.safetensors" bs=1 seek="$off" conv=notrunc status=none
refused bit-flipped "$work/flipped.safetensors" "checksum\|crc"
"$other" "$work/other.safetensors" || exit 1
refused wrong-model "$work/other.safetensors" "missing\|unexpected\|expected"
printf 'not a checkpoint at all' > "$work/garbage.safetensors"
refused garbage "$work/garbage.safetensors" "header\|short\|trunc\|length"
exit $fail
