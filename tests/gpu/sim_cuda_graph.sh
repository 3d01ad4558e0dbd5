#!/usr/bin/env bash
# A small gpt (dropout on, 4 layers) built with --target cuda trains 3
# steps on the PTX simulator with its training step as one CUDA graph
# (the default) and with --no-cuda-graph: the losses and gradient norms
# (--metrics: 9 digits, every bit of an f32) and the saved checkpoints must
# be the same bits. --profile must
# say "launches per step: 1 graph launch (N kernels, ...)", and the
# simulator's own count (TFM_PTX_SIM_COUNTS) must agree: 3 graph launches
# running 3 N kernels. Without graphs: no graph launch, and 3 N more
# kernels launched directly. A --gemm=cublas build says in
# its profile that it launches directly, and why.
# usage: sim_cuda_graph.sh TFMC GPT_TFM CORPUS SIM_DIR WORKDIR
set -euo pipefail
tfmc=$1 model=$2 corpus=$3 sim=$4 work=$5
rm -rf "$work" && mkdir -p "$work"
config=(-D vocab=80 -D d_model=32 -D heads=2 -D layers=4 -D seq_len=8 -D batch=2 -D p_drop=0.1)
fail() { echo "FAIL: $1"; [ -z "${2:-}" ] || cat "$2"; exit 1; }
# train NAME BINARY OPTIONS...: 3 steps on the simulator, counts in NAME.counts
train() {
  local name=$1 binary=$2
  shift 2
  LD_LIBRARY_PATH=$sim TFM_PTX_SIM_COUNTS=$work/$name.counts "$binary" train --data "$corpus" \
    --steps 3 --log-every 1 --profile --metrics "$work/$name" --save "$work/$name.ckpt" "$@" \
    > "$work/$name.log" 2>&1 || fail "$name: train" "$work/$name.log"
}
count() { awk -v k="$1" '{ v = $NF; $NF = ""; sub(/ $/, ""); if ($0 == k) print v }' "$2"; }
"$tfmc" build "$model" "${config[@]}" --target cuda -o "$work/gpu"
train graph "$work/gpu"
train direct "$work/gpu" --no-cuda-graph

losses() { grep -o '"\(loss\|grad_norm\)":[^,}]*' "$1"; }
[ "$(losses "$work/graph" | wc -l)" -eq 6 ] || fail "no 3 losses and norms in the metrics" "$work/graph"
[ "$(losses "$work/graph")" = "$(losses "$work/direct")" ] ||
  fail "the losses differ: $(losses "$work/graph" | tr '\n' ' ') vs $(losses "$work/direct" | tr '\n' ' ')"
cmp "$work/graph.ckpt" "$work/direct.ckpt" || fail "the checkpoints differ"
echo "ok: with and without a CUDA graph, the same losses and checkpoint bits: $(losses "$work/graph" | tr '\n' ' ')"

line=$(grep '^launches per step:' "$work/graph.log") || fail "no launches line" "$work/graph.log"
kernels=$(sed -n 's/^launches per step: 1 graph launch (\([0-9]*\) kernels, [0-9]* copies)$/\1/p' \
  <<< "$line")
[ -n "$kernels" ] && [ "$kernels" -gt 0 ] || fail "--profile says '$line'"
[ "$(count cuGraphLaunch "$work/graph.counts")" -eq 3 ] &&
  [ "$(count 'graph kernels' "$work/graph.counts")" -eq $((3 * kernels)) ] ||
  fail "the simulator counted otherwise (3 graph launches of $kernels kernels)" "$work/graph.counts"
echo "ok: $line; the simulator counted 3 graph launches, $((3 * kernels)) kernels in them"

# The other graphs (init, the held-out loss's forward) launch directly either way.
direct=$(($(count cuLaunchKernel "$work/direct.counts") - $(count cuLaunchKernel "$work/graph.counts")))
[ "$(count cuGraphLaunch "$work/direct.counts")" -eq 0 ] && [ "$direct" -eq $((3 * kernels)) ] ||
  fail "--no-cuda-graph: the simulator counted otherwise" "$work/direct.counts"
grep -q "^launches per step: $kernels kernel launches, 0 cuBLAS calls, .*(not a CUDA graph: --no-cuda-graph)$" \
  "$work/direct.log" || fail "--no-cuda-graph: no launches line" "$work/direct.log"
echo "ok: --no-cuda-graph: $direct more kernels launched one by one, no graph"

"$tfmc" build "$model" "${config[@]}" --target cuda --gemm=cublas -o "$work/gpu_cublas"
train cublas "$work/gpu_cublas"
grep -q '^launches per step: .*(not a CUDA graph: --gemm=cublas, ' "$work/cublas.log" ||
  fail "--gemm=cublas: no note that it launches directly" "$work/cublas.log"
[ "$(count cuGraphLaunch "$work/cublas.counts")" -eq 0 ] || fail "--gemm=cublas: a graph launched"
echo "ok: --gemm=cublas: $(grep '^launches per step:' "$work/cublas.log")"
