#!/usr/bin/env bash
# tfmc build --target cuda makes a binary, with the dots as PTX kernels and
# with --gemm=cublas; without a CUDA driver, training prints the one clear
# line and exits 1 (with a driver it must train).
# usage: cuda_binary.sh TFMC GPT_TFM CORPUS WORKDIR
set -eu
tfmc=$1 model=$2 corpus=$3 work=$4
rm -rf "$work" && mkdir -p "$work"
expected="no CUDA driver found (libcuda.so.1): build with --target cpu or run on a machine with an NVIDIA GPU"
for gemm in generated cublas; do
  "$tfmc" build "$model" -D vocab=80 -D d_model=16 -D heads=2 -D layers=1 -D seq_len=8 -D batch=4 \
    --target cuda --gemm=$gemm -o "$work/gpt_$gemm"
  test -x "$work/gpt_$gemm"
  "$work/gpt_$gemm" info | grep -q "param  wte.table" # no device needed to describe the model
  status=0
  "$work/gpt_$gemm" train --data "$corpus" --steps 2 > "$work/out" 2> "$work/err" || status=$?
  if ldconfig -p 2> /dev/null | grep -q 'libcuda\.so\.1 '; then
    test $status -eq 0 ||
      { echo "FAIL: --gemm=$gemm: a driver is installed but training failed:"; cat "$work/err"; exit 1; }
    echo "ok: --gemm=$gemm: driver present; the cuda binary trained 2 steps"
    continue
  fi
  test $status -eq 1 || { echo "FAIL: --gemm=$gemm: exit status $status, expected 1"; cat "$work/err"; exit 1; }
  test "$(cat "$work/err")" = "$expected" ||
    { echo "FAIL: --gemm=$gemm: stderr was:"; cat "$work/err"; exit 1; }
  echo "ok: --gemm=$gemm: built; without a driver it said '$expected' and exited 1"
done
# cuBLAS is for the GPU only, and an unknown --gemm is named.
status=0
"$tfmc" build "$model" --gemm=cublas -o "$work/cpu" 2> "$work/err" || status=$?
test $status -eq 2 && grep -q -- "--gemm=cublas goes with build --target cuda or emit ptx" "$work/err" ||
  { echo "FAIL: --gemm=cublas with --target cpu: status $status"; cat "$work/err"; exit 1; }
status=0
"$tfmc" build "$model" --target cuda --gemm=mkl -o "$work/mkl" 2> "$work/err" || status=$?
test $status -eq 2 && grep -q -- "--gemm: unknown 'mkl' (generated, cublas)" "$work/err" ||
  { echo "FAIL: --gemm=mkl: status $status"; cat "$work/err"; exit 1; }
echo "ok: --gemm=cublas refused with --target cpu, --gemm=mkl refused"
