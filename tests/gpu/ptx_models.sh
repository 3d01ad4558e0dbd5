#!/usr/bin/env bash
# Both models' training graphs at their default configs as PTX: ptxas must
# accept every kernel for sm_80 and sm_90 (emit kernels --target cuda runs
# ptxas -v), no kernel may spill, and emit ptx must carry the right header.
# Exit 77 (skipped) only when there is no ptxas. DTYPE (f32 by default) is
# tfmc's --dtype: with bf16 the dots are mma.m16n8k16 bf16 kernels, and so
# is gpt's fused attention.
# SIM_LOAD (gpu_ptx_sim_test) also loads each PTX into the PTX simulator.
# usage: ptx_models.sh TFMC MODELS_DIR [DTYPE [SIM_LOAD]]
set -eu
tfmc=$1 models=$2 dtype=${3:-f32} sim_load=${4:-}
. "$(dirname "$0")/find_ptxas.sh"
# sm_80 through emit kernels (its ptxas -v table), sm_90 through emit ptx
# and ptxas -v here: each PTX is generated and assembled once.
for model in gpt transformer; do
  "$tfmc" emit kernels "$models/$model.tfm" --train --dtype "$dtype" --target cuda --gpu-arch sm_80 > "$work/k"
  summary=$(tail -1 "$work/k")
  case $summary in
    *" functions, at most "*" registers, 0 bytes spilled") ;;
    *) echo "FAIL: $model sm_80: $summary"; exit 1 ;;
  esac
  echo "ok: $model train graph ($dtype), sm_80: $summary"
  # gpt's attention (causal, no mask input) in bf16: every fused attention
  # kernel on tensor cores (ptx/attention_mma.c), the forward and all three
  # gradients
  if [ "$dtype" = bf16 ] && [ "$model" = gpt ]; then
    grep -E '^k[0-9]+ +attention' "$work/k" > "$work/att" || true
    roots=$(awk '{print $2}' "$work/att" | sort -u | tr '\n' ' ')
    [ "$roots" = "attention attention_grad_k attention_grad_q " ] ||
      { echo "FAIL: gpt bf16: attention kernels '$roots'"; exit 1; }
    if grep -qv ' mma$' "$work/att"; then
      echo "FAIL: gpt bf16: an attention kernel not on tensor cores:"; cat "$work/att"; exit 1
    fi
    echo "ok: gpt bf16: $(wc -l < "$work/att") attention kernels on tensor cores"
  fi
  "$tfmc" emit ptx "$models/$model.tfm" --train --dtype "$dtype" --gpu-arch sm_90 > "$work/p.ptx"
  if [ "$dtype" = bf16 ]; then
    grep -q "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" "$work/p.ptx" ||
      { echo "FAIL: $model bf16: no bf16 mma.sync in the PTX"; exit 1; }
  fi
  grep -qx ".target sm_90" "$work/p.ptx" || { echo "FAIL: $model sm_90: no .target sm_90"; exit 1; }
  entries=$(grep -c '^.visible .entry' "$work/p.ptx")
  "$ptxas" -v -arch=sm_90 -o /dev/null "$work/p.ptx" > "$work/v" 2>&1 || { cat "$work/v"; exit 1; }
  functions=$(grep -c "Compiling entry function" "$work/v")
  test "$functions" -eq "$entries" || { echo "FAIL: $model sm_90: $functions of $entries compiled"; exit 1; }
  if grep "spill" "$work/v" | grep -qv " 0 bytes spill stores, 0 bytes spill loads"; then
    echo "FAIL: $model sm_90: a kernel spills"; exit 1
  fi
  echo "ok: $model train graph ($dtype), sm_90: $entries entries accepted, no spills"
  [ -z "$sim_load" ] || "$sim_load" "$work/p.ptx"
done
