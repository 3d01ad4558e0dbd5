#!/usr/bin/env bash
# tfmc build --target cuda makes a binary; without a CUDA driver, training
# prints the one clear line and exits 1 (with a driver it must train).
# usage: cuda_binary.sh TFMC GPT_TFM CORPUS WORKDIR
set -eu
tfmc=$1 model=$2 corpus=$3 work=$4
rm -rf "$work" && mkdir -p "$work"
"$tfmc" build "$model" -D vocab=80 -D d_model=16 -D heads=2 -D layers=1 -D seq_len=8 -D batch=4 \
  --target cuda -o "$work/gpt"
test -x "$work/gpt"
"$work/gpt" info | grep -q "param  wte.table" # no device needed to describe the model
status=0
"$work/gpt" train --data "$corpus" --steps 2 > "$work/out" 2> "$work/err" || status=$?
if ldconfig -p 2> /dev/null | grep -q 'libcuda\.so\.1 '; then
  test $status -eq 0 || { echo "FAIL: a driver is installed but training failed:"; cat "$work/err"; exit 1; }
  echo "ok: driver present; the cuda binary trained 2 steps"
  exit 0
fi
expected="no CUDA driver found (libcuda.so.1): build with --target cpu or run on a machine with an NVIDIA GPU"
test $status -eq 1 || { echo "FAIL: exit status $status, expected 1"; cat "$work/err"; exit 1; }
test "$(cat "$work/err")" = "$expected" || { echo "FAIL: stderr was:"; cat "$work/err"; exit 1; }
echo "ok: built; without a driver it said '$expected' and exited 1"
