#!/usr/bin/env bash
# A small gpt built with --target cuda trains on the PTX simulator (SIM_DIR
# holds its libcuda.so.1) as its --target cpu build does: the same loss at
# every logged step, within 2e-4 in f32 (4 decimals printed; the GPU's
# dots round to tf32) and within 1e-2 with --dtype bf16 (as
# tests/gpu/run.sh holds a GPU to the CPU: 8 bits, different sums). This
# runs the GPU path end to end without a GPU: the host code's launches,
# the device arena (params and optimizer states kept on the device, the
# update copied there) and every kernel's PTX.
# usage: sim_gpt.sh TFMC GPT_TFM CORPUS SIM_DIR WORKDIR
set -eu
tfmc=$1 model=$2 corpus=$3 sim=$4 work=$5
rm -rf "$work" && mkdir -p "$work"
config=(-D vocab=80 -D d_model=32 -D heads=2 -D layers=2 -D seq_len=8 -D batch=2)
losses() { awk '/^step / { print $2, $4 }' "$1"; }
for dtype in f32:2e-4 bf16:1e-2; do
  tolerance=${dtype#*:} dtype=${dtype%:*}
  "$tfmc" build "$model" "${config[@]}" --dtype $dtype --target cuda -o "$work/gpu_$dtype"
  "$tfmc" build "$model" "${config[@]}" --dtype $dtype -o "$work/cpu_$dtype"
  LD_LIBRARY_PATH=$sim "$work/gpu_$dtype" train --data "$corpus" --steps 3 --log-every 1 \
    > "$work/gpu_$dtype.log" 2>&1 || { echo "FAIL: $dtype: the cuda build failed:"; cat "$work/gpu_$dtype.log"; exit 1; }
  "$work/cpu_$dtype" train --data "$corpus" --steps 3 --log-every 1 > "$work/cpu_$dtype.log" 2>&1
  if ! paste <(losses "$work/gpu_$dtype.log") <(losses "$work/cpu_$dtype.log") |
       awk -v tol="$tolerance" '{ n++; d = $2 - $4; if ($1 != $3 || d > tol || -d > tol) bad = 1 }
                               END { exit bad || n != 3 }'; then
    echo "FAIL: $dtype: the simulated GPU's losses differ from the CPU's:"
    paste <(losses "$work/gpu_$dtype.log") <(losses "$work/cpu_$dtype.log"); exit 1
  fi
  echo "ok: $dtype: 3 steps on the simulated GPU, losses as the CPU's (within $tolerance): $(losses "$work/gpu_$dtype.log" | tr '\n' ' ')"
done
