#!/usr/bin/env bash
# One gpt-small training step (models/gpt.tfm defaults) built with
# --dtype bf16, once per kernel family of bf16 products (TFM_CPU_KERNELS:
# avx2 is the widening f32 path every build had before the AMX and
# AVX512-BF16 families), against PyTorch 2.x eager with bf16 autocast
# (../shared/bench/peers_gpt.py torch-eager-bf16, 2 threads) in the same
# run: ROUNDS rounds, alternating; per side the median over rounds of each
# round's median step (3 warm-up steps, then the median of 10 steps'
# times, as bench/gpt_step.sh takes them). A benchmark, not a test.
# usage: bench/gpt_step_bf16.sh TFMC PYTHON [ROUNDS]
set -euo pipefail
tfmc=$1 python=$2 rounds=${3:-3}
root=$(cd "$(dirname "$0")/.." && pwd)
peer=$root/../shared/bench/peers_gpt.py
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for i in $(seq 200); do cat "$root/README.md"; done > "$work/corpus.txt"
"$tfmc" build "$root/models/gpt.tfm" --dtype bf16 -o "$work/gpt"
step_median() {
  "$work/gpt" train --data "$work/corpus.txt" --steps 13 --log-every 1 --threads 2 | {
    local line stamps=()
    while IFS= read -r line; do
      case $line in step*) stamps+=("$EPOCHREALTIME") ;; esac
    done
    printf '%s\n' "${stamps[@]:2:11}" | awk 'NR > 1 { print $1 - prev } { prev = $1 }' |
      sort -g | awk '{ a[NR] = $1 } END { print a[int(NR / 2) + 1] }'
  }
}
for r in $(seq "$rounds"); do
  for family in avx2 avx512bf16 amx; do
    echo "$family $(TFM_CPU_KERNELS=$family step_median)" >> "$work/times"
  done
  if [ -f "$peer" ]; then
    # OpenMP's workers sleep rather than spin (bench/gemm_bf16.sh says why).
    ms=$(OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE} "$python" "$peer" torch-eager-bf16 2 |
         awk '/median step/ { print $4 }')
    echo "torch-eager-bf16 $(awk -v ms="$ms" 'BEGIN { print ms / 1000 }')" >> "$work/times"
  fi
done
awk '{ t[$1] = t[$1] " " $2 }
  function median(list,   v, k, i, j, x) {
    k = split(list, v, " ")
    for (i = 2; i <= k; i++) { x = v[i]; for (j = i - 1; j >= 1 && v[j] > x; j--) v[j + 1] = v[j]; v[j + 1] = x }
    return v[int((k + 1) / 2)]
  }
  END {
    base = median(t["avx2"]); peer = ("torch-eager-bf16" in t) ? median(t["torch-eager-bf16"]) : 0
    for (s in t) {
      printf "%-18s %8.4f s/step   rounds:%s   avx2 / this %.2f", s, median(t[s]), t[s], base / median(t[s])
      if (peer) printf "   this / torch-eager-bf16 %.2f", median(t[s]) / peer
      printf "\n"
    }
  }' "$work/times" | sort
