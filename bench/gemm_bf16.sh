#!/usr/bin/env bash
# The generated bf16 GEMM per kernel family (AMX, AVX512-BF16, the widening
# f32 path) against torch.matmul on bf16 (oneDNN), 2 threads each, in the same
# run: ROUNDS rounds, each running, case by case, gemm_bf16_bench once per
# family and the peer once, alternating; prints per case each side's median
# over the rounds, GFLOP/s, and the ratio peer time / ours (> 1: ours faster).
# usage: bench/gemm_bf16.sh BUILD_DIR PYTHON [ROUNDS [FILTER]]
#   (PYTHON: one with PyTorch 2.x, e.g. /work/benchenv/bin/python)
set -eu
build=$1 python=$2 rounds=${3:-3} filter=${4:-}
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# Case by case, so that each side's runs of a case are seconds apart (the
# load on a shared machine moves within minutes); the names are the C list's.
cases=$(awk -F'"' '/^    \{"/ { print $2 }' "$here/gemm_bf16_bench.c" | grep -F -- "$filter")
for r in $(seq "$rounds"); do
  while IFS= read -r case; do
    for family in amx avx512bf16 avx2; do
      TFM_CPU_KERNELS=$family "$build/bench/gemm_bf16_bench" 3 "$case" >> "$out/times"
    done
    # OpenMP's workers sleep between calls instead of spinning: on a loaded
    # 2-core machine a spinning worker that lost its core stalled every
    # barrier (the gpt shapes ran at 38 GFLOP/s spinning, 435 sleeping).
    OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE} \
      "$python" "$here/peer_matmul_bf16.py" 3 "$case" >> "$out/times" 2>> "$out/peer"
  done <<< "$cases"
done
sort -u "$out/peer"
awk -F'\t' '
  { t[$1, $2] = t[$1, $2] " " $3; gf[$1, $2] = gf[$1, $2] " " $4; err[$1, $2] = $5
    if (!($1 in seen)) { seen[$1] = 1; order[n++] = $1 } }
  function median(list,   v, k, i, j, x) {
    k = split(list, v, " ")
    for (i = 2; i <= k; i++) { x = v[i]; for (j = i - 1; j >= 1 && v[j] > x; j--) v[j + 1] = v[j]; v[j + 1] = x }
    return v[int((k + 1) / 2)]
  }
  END {
    printf "%-34s %9s %9s %9s %9s %6s %6s %6s %8s\n", "case (GFLOP/s, medians)", "amx", "avx512bf16",
           "avx2", "oneDNN", "amx", "bf16", "avx2", "max err"
    for (i = 0; i < n; i++) {
      c = order[i]; p = median(t[c, "onednn"])
      printf "%-34s %9.0f %9.0f %9.0f %9.0f %6.2f %6.2f %6.2f %8.1e\n", c,
             median(gf[c, "amx"]), median(gf[c, "avx512bf16"]), median(gf[c, "avx2"]),
             median(gf[c, "onednn"]), p / median(t[c, "amx"]), p / median(t[c, "avx512bf16"]),
             p / median(t[c, "avx2"]), err[c, "amx"]
    }
    print "(ratios: oneDNN time / ours; max err: AMX family, relative to sum_k |a||b|)"
  }' "$out/times"
