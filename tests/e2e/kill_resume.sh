#!/usr/bin/env bash
# A run killed with SIGKILL and restarted with --resume ends with the same
# bits as an uninterrupted run with the same seed and checkpoint schedule.
# usage: kill_resume.sh BINARY CORPUS WORKDIR
set -u
bin=$1 corpus=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
common=(train --data "$corpus" --steps 40 --every 10 --seed 7 --log-every 10)
"$bin" "${common[@]}" --save "$work/straight.safetensors" > /dev/null || exit 1
# Killed right after step 25: the last checkpoint on disk is step 20's.
TFM_TEST_KILL_AT_STEP=25 "$bin" "${common[@]}" --save "$work/resumed.safetensors" > /dev/null
status=$?
if [ "$status" -ne 137 ]; then
  echo "FAIL: the run was not killed (status $status)"
  exit 1
fi
"$bin" "${common[@]}" --save "$work/resumed.safetensors" --resume > "$work/log" || exit 1
grep -q "resuming from .* at step 20" "$work/log" ||
  { echo "FAIL: did not resume from step 20"; cat "$work/log"; exit 1; }
if cmp "$work/straight.safetensors" "$work/resumed.safetensors"; then
  echo "ok: resumed run is bit-identical to the uninterrupted one"
else
  echo "FAIL: the checkpoints differ"
  exit 1
fi
# --load is for eval, translate and generate: train refuses it (status 2)
# and says how to continue a run instead of training from scratch.
out=$("$bin" "${common[@]}" --load "$work/straight.safetensors" 2>&1 >/dev/null)
status=$?
if [ "$status" -eq 2 ] && printf '%s' "$out" | grep -q -- "--resume"; then
  echo "ok: train --load refused: $out"
else
  echo "FAIL: train --load: status $status, message: $out"
  exit 1
fi
