#!/usr/bin/env bash
# GPT-2 124M (models/gpt2.tfm: 12 layers, 768 wide, 12 heads, vocab 50257,
# T = 1024, batch 8), the benchmark tests/gpu/run.sh times, as PTX for
# --target cuda in f32 and bf16: ptxas must accept every kernel for sm_80
# and sm_90, and no kernel may spill (the gradient norm, a sum over 148
# parameters' squared gradients, spilled until its long sums were split
# over blocks and its kernel's hoisted sums capped: KernelPlanOptions).
# Exit 77 (skipped) only when there is no ptxas.
# usage: ptx_gpt2.sh TFMC GPT2_TFM
set -euo pipefail
tfmc=$1 model=$2
. "$(dirname "$0")/find_ptxas.sh"
for dtype in f32 bf16; do
  "$tfmc" emit kernels "$model" --train --dtype "$dtype" --target cuda --gpu-arch sm_80 > "$work/k"
  tail -1 "$work/k" | grep -q " functions, at most " || { tail -3 "$work/k"; exit 1; }
  # tfmc emit kernels' ptxas -v table: "function root registers spill-stores spill-loads ..."
  spilling=$(awk '/^k[0-9]+ / && ($4 != 0 || $5 != 0)' "$work/k")
  [ -z "$spilling" ] || { echo "FAIL: $dtype sm_80: kernels spill:"; echo "$spilling"; exit 1; }
  echo "ok: gpt2 124M train graph ($dtype), sm_80: $(tail -1 "$work/k")"
  "$tfmc" emit ptx "$model" --train --dtype "$dtype" --gpu-arch sm_90 > "$work/p.ptx"
  grep -qx ".target sm_90" "$work/p.ptx" || { echo "FAIL: $dtype sm_90: no .target sm_90"; exit 1; }
  entries=$(grep -c '^.visible .entry' "$work/p.ptx")
  "$ptxas" -v -arch=sm_90 -o /dev/null "$work/p.ptx" > "$work/v" 2>&1 || { tail -20 "$work/v"; exit 1; }
  functions=$(grep -c "Compiling entry function" "$work/v")
  [ "$functions" -eq "$entries" ] || { echo "FAIL: $dtype sm_90: $functions of $entries compiled"; exit 1; }
  # ptxas -v: "Compiling entry function 'NAME'", then its spill line
  spilling=$(awk "/Compiling entry function/ { name = \$0; sub(/^.*function '/, \"\", name); sub(/'.*/, \"\", name) }
                  /spill stores/ && !/ 0 bytes spill stores, 0 bytes spill loads/ { print name }" "$work/v")
  [ -z "$spilling" ] || { echo "FAIL: $dtype sm_90: spilling:" $spilling; exit 1; }
  echo "ok: gpt2 124M train graph ($dtype), sm_90: $entries entries accepted, no spills"
done
