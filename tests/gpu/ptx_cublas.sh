#!/usr/bin/env bash
# emit ptx --gemm=cublas: a small gpt's training graph loses exactly its dot
# functions' entries (cuBLAS computes those), keeps every other one, and
# ptxas still accepts the PTX. Exit 77 (skipped) only when there is no ptxas.
# usage: ptx_cublas.sh TFMC GPT_TFM
set -eu
tfmc=$1 model=$2
. "$(dirname "$0")/find_ptxas.sh"
config=(-D vocab=80 -D d_model=16 -D heads=2 -D layers=1 -D seq_len=8 -D batch=4 --train)
# "kernel K fn F dot ...": the functions of each kind, in the GPU's plan
# (which emit ptx uses too).
"$tfmc" emit kernels "$model" "${config[@]}" --target cuda |
  awk '$1 == "kernel" { print $4, $5 }' | sort -u > "$work/functions"
"$tfmc" emit ptx "$model" "${config[@]}" --gemm=cublas > "$work/p.ptx"
grep '^.visible .entry' "$work/p.ptx" | sed 's/.*tfm_model_k\([0-9]*\)(.*/\1/' | sort > "$work/entries"
awk '$2 != "dot" { print $1 }' "$work/functions" | sort > "$work/want"
dots=$(awk '$2 == "dot"' "$work/functions" | wc -l)
test "$dots" -gt 0 || { echo "FAIL: the graph has no dot to leave out"; exit 1; }
diff "$work/want" "$work/entries" > /dev/null ||
  { echo "FAIL: entries are not the non-dot functions:"; diff "$work/want" "$work/entries"; exit 1; }
"$ptxas" -arch=sm_80 -o /dev/null "$work/p.ptx" || { echo "FAIL: ptxas refused the PTX"; exit 1; }
echo "ok: --gemm=cublas left out the $dots dot functions; $(wc -l < "$work/entries") entries, ptxas accepts"
