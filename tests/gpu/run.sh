#!/usr/bin/env bash
# The GPU checks, for a machine with an NVIDIA GPU (under 5 minutes):
#  1. builds tfm (build-gpu/);
#  2. compiled vs evaluator on the GPU: every primitive, the fused rows, an
#     MLP's training steps and both models (gradients and a training step),
#     the codegen suites run with TFM_CG_TARGET=cuda;
#  3. trains gpt-small (models/gpt.tfm defaults) for 50 steps built with
#     --target cuda, again with --target cuda --gemm=cublas (the dots
#     through cuBLAS), and with --target cpu: the step-50 losses must agree;
#  4. prints a table: checks passed, step time, achieved TFLOP/s (counted
#     as 6 x parameters x tokens per step, the usual estimate).
# Without a GPU it says "no GPU" and exits 0.
# usage: tests/gpu/run.sh [--gpu-arch sm_80|sm_90]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
arch=sm_80
if [ "${1:-}" = "--gpu-arch" ]; then arch=$2; fi
if ! ldconfig -p 2> /dev/null | grep -q 'libcuda\.so\.1 ' ||
   { command -v nvidia-smi > /dev/null && ! nvidia-smi -L 2> /dev/null | grep -q '^GPU '; }; then
  echo "no GPU"
  exit 0
fi
start=$(date +%s)
build=$root/build-gpu
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "== build"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release > "$work/cmake.log"
ninja -C "$build" > "$work/ninja.log" || { tail -20 "$work/ninja.log"; exit 1; }
tfmc=$build/compiler/tfmc

echo "== compiled vs evaluator on the GPU"
passed=0 failed=0
for suite in ops fusion train models; do
  status=0
  TFM_CG_TARGET=cuda timeout 150 "$build/tests/codegen/codegen_$suite" > "$work/$suite.log" 2>&1 ||
    status=$?
  ok=$(grep -c '^ok ' "$work/$suite.log" || true)
  bad=$(grep -c '^FAIL ' "$work/$suite.log" || true)
  if [ $status -ne 0 ] && [ "$bad" -eq 0 ]; then bad=1; fi
  passed=$((passed + ok)) failed=$((failed + bad))
  printf '  codegen_%-7s %3d ok, %d failed\n' "$suite" "$ok" "$bad"
  [ $status -eq 0 ] || tail -5 "$work/$suite.log"
done

echo "== gpt-small, 50 steps"
corpus=$build/examples/textlm/corpus.txt
"$tfmc" build "$root/models/gpt.tfm" --target cuda --gpu-arch "$arch" -o "$work/gpt_cuda"
"$tfmc" build "$root/models/gpt.tfm" --target cuda --gpu-arch "$arch" --gemm=cublas \
  -o "$work/gpt_cublas"
"$tfmc" build "$root/models/gpt.tfm" -o "$work/gpt_cpu"
timed() { # BINARY STEPS -> seconds; the log in $work/log.STEPS
  local t0 t1
  t0=$(date +%s.%N)
  "$1" train --data "$corpus" --steps "$2" --log-every 50 > "$work/log.$2"
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }'
}
# (time of 55 steps - time of 5) / 50: start-up and module loading cancel.
short=$(timed "$work/gpt_cuda" 5)
long=$(timed "$work/gpt_cuda" 55)
step=$(awk -v l="$long" -v s="$short" 'BEGIN { print (l - s) / 50 }')
gpu_loss=$(awk '/^step 50\// { print $4 }' "$work/log.55")
short=$(timed "$work/gpt_cublas" 5)
long=$(timed "$work/gpt_cublas" 55)
cublas_step=$(awk -v l="$long" -v s="$short" 'BEGIN { print (l - s) / 50 }')
cublas_loss=$(awk '/^step 50\// { print $4 }' "$work/log.55")
timed "$work/gpt_cpu" 50 > /dev/null
cpu_loss=$(awk '/^step 50\// { print $4 }' "$work/log.50")
params=$("$tfmc" stats "$root/models/gpt.tfm" | awk '$1 == "total" { gsub(",", "", $2); print $2 }')
tokens=$((16 * 128))
tflops=$(awk -v p="$params" -v t="$tokens" -v s="$step" 'BEGIN { print 6 * p * t / s / 1e12 }')
agrees() { # LOSS CPU_LOSS: within 1e-3 relative
  awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d <= 1e-3 * (b < 0 ? -b : b)) }'
}
if agrees "$gpu_loss" "$cpu_loss"; then
  passed=$((passed + 1)); agree=yes
else
  failed=$((failed + 1)); agree=NO
fi
if agrees "$cublas_loss" "$cpu_loss"; then
  passed=$((passed + 1)); cublas_agree=yes
else
  failed=$((failed + 1)); cublas_agree=NO
fi

echo
echo "| GPU checks ($arch)                      | result |"
echo "|-----------------------------------------|--------|"
printf '| compiled vs evaluator checks passed      | %d of %d |\n' "$passed" $((passed + failed))
printf '| gpt-small loss at step 50, GPU vs CPU    | %s vs %s (%s) |\n' "$gpu_loss" "$cpu_loss" "$agree"
printf '| gpt-small loss, --gemm=cublas vs CPU     | %s vs %s (%s) |\n' "$cublas_loss" "$cpu_loss" "$cublas_agree"
printf '| gpt-small step time                      | %.1f ms |\n' "$(awk -v s="$step" 'BEGIN { print s * 1000 }')"
printf '| gpt-small step time, --gemm=cublas       | %.1f ms |\n' "$(awk -v s="$cublas_step" 'BEGIN { print s * 1000 }')"
printf '| achieved TFLOP/s (6 x %s params x %d tokens) | %.3f |\n' "$params" "$tokens" "$tflops"
printf '| wall time                                | %d s |\n' $(($(date +%s) - start))
[ "$failed" -eq 0 ]
