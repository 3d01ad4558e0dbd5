#!/usr/bin/env bash
# The GPU checks, for a machine with an NVIDIA GPU (under 10 minutes):
#  1. builds tfm (build-gpu/), unless --prebuilt names a build made elsewhere;
#  2. compiled vs evaluator on the GPU: every primitive, the GEMM cases, the
#     fused rows, an MLP's training steps, bf16 storage, both models
#     (gradients and a training step; also lowered with --dtype bf16) and the
#     std layers (LSTM, GRU, the scores, conv1d), every codegen suite run side
#     by side with TFM_CG_TARGET=cuda;
#  3. trains gpt-small (models/gpt.tfm defaults) for 50 steps built with
#     --target cuda, again with --target cuda --gemm=cublas (the dots
#     through cuBLAS), and with --target cpu: the step-50 losses must agree
#     within 1e-3; and with --dtype bf16 on the GPU and on the CPU: within
#     1e-2 (bf16 keeps 8 bits, and the two round different sums);
#  4. data-parallel over NCCL: gpt-small built --target cuda --data-parallel
#     trains 20 steps as one process, and again through the data-parallel
#     loop on a one-rank NCCL communicator (train --data-parallel): the
#     losses must agree within 1e-6 (the table says whether bit for bit);
#     skipped, saying so, where no libnccl.so.2 is found (the system's, or
#     python3's nvidia-nccl-cu12 wheel, which PyTorch brings);
#  5. times the same step in PyTorch eager on the GPU (bench/torch_gpt_cuda.py,
#     tf32 products), when python3 has torch with CUDA;
#  6. GPT-2 124M (models/gpt2.tfm, batch 8 x 1024 tokens, dropout 0) in
#     bf16 with --target cuda (its step one CUDA graph) against the same
#     model in PyTorch eager and torch.compile under bf16 autocast
#     (bench/torch_gpt2_cuda.py), two rounds alternating tfm, eager,
#     compile, the best of each kept, with MFU = 6 x params x tokens per
#     step / step time / the GPU's dense bf16 peak (H100 and H200: 989
#     TFLOP/s, A100: 312; none printed for another GPU); and gpt2.tfm at a
#     small config (2 layers, 128 wide, 128 tokens, vocab 512) trained 50
#     steps in bf16 on the GPU and on the CPU: losses within 1e-2;
#  7. prints a table: checks passed, step times, the ratio to PyTorch and
#     achieved TFLOP/s (counted as 6 x parameters x tokens per step, the
#     usual estimate).
# Without a GPU it says "no GPU" and exits 0. Without PyTorch (python3
# cannot import torch with CUDA, and no --wheels) the PyTorch rows say so.
# usage: tests/gpu/run.sh [--gpu-arch sm_80|sm_90] [--prebuilt BUILD] [--logs DIR] [--wheels DIR]
#   --prebuilt BUILD  use the Release build in BUILD as it is and build nothing
#                     (for a GPU machine without LLVM's headers: build where
#                     they are, at the same path, and bring BUILD along)
#   --logs DIR        keep every log in DIR, a --profile of 13 GPU steps too
#                     (default: a temporary folder, removed at the end)
#   --wheels DIR      when python3 has no torch: install it (and what it needs)
#                     from the wheels in DIR into a virtual environment in the
#                     work folder, offline (pip --no-index); make DIR where
#                     there is a network with the GPU machine's python:
#                     python3 -m pip download torch -d DIR
set -uo pipefail # not -e: a part that fails is counted and the table still printed
root=$(cd "$(dirname "$0")/../.." && pwd)
arch=sm_80 build=$root/build-gpu prebuilt=no work='' keep_logs=no wheels=''
usage() {
  echo "usage: tests/gpu/run.sh [--gpu-arch sm_80|sm_90] [--prebuilt BUILD] [--logs DIR]" \
       "[--wheels DIR]" >&2
  [ -z "${1:-}" ] || echo "tests/gpu/run.sh: $1" >&2
  exit 2
}
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || usage "$1 needs a value"
  case $1 in
  --gpu-arch) arch=$2 ;;
  --prebuilt)
    [ -x "$2/compiler/tfmc" ] || usage "--prebuilt $2: no build there (no $2/compiler/tfmc)"
    build=$(cd "$2" && pwd) prebuilt=yes ;;
  --logs) { mkdir -p "$2" && work=$(cd "$2" && pwd); } || usage "--logs $2: cannot use that folder"
    keep_logs=yes ;;
  --wheels) [ -d "$2" ] || usage "--wheels $2: no such folder"
    wheels=$(cd "$2" && pwd) ;;
  *) usage "unknown option '$1'" ;;
  esac
  shift 2
done
if ! ldconfig -p 2> /dev/null | grep -q 'libcuda\.so\.1 ' ||
   { command -v nvidia-smi > /dev/null && ! nvidia-smi -L 2> /dev/null | grep -q '^GPU '; }; then
  echo "no GPU"
  exit 0
fi
start=$(date +%s)
if [ -z "$work" ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi
if [ $prebuilt = no ]; then
  echo "== build"
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release > "$work/cmake.log" ||
    { tail -20 "$work/cmake.log"; exit 1; }
  ninja -C "$build" > "$work/ninja.log" || { tail -20 "$work/ninja.log"; exit 1; }
fi
tfmc=$build/compiler/tfmc
passed=0 failed=0

echo "== compiled vs evaluator on the GPU"
suites=(ops gemm fusion train bf16 models models_std models_bf16)
declare -A pid
for suite in "${suites[@]}"; do
  # codegen_models_std runs codegen_models std, and so on
  binary=${suite%%_*} argument=${suite#*_}
  [ "$argument" = "$suite" ] && argument=''
  TFM_CG_TARGET=cuda timeout 150 "$build/tests/codegen/codegen_$binary" ${argument:+"$argument"} \
    > "$work/$suite.log" 2>&1 &
  pid[$suite]=$!
done
for suite in "${suites[@]}"; do
  status=0
  wait "${pid[$suite]}" || status=$?
  ok=$(grep -c '^ok ' "$work/$suite.log")
  bad=$(grep -c '^FAIL ' "$work/$suite.log")
  if [ $status -ne 0 ] && [ "$bad" -eq 0 ]; then bad=1; fi
  passed=$((passed + ok)) failed=$((failed + bad))
  printf '  codegen_%-11s %3d ok, %d failed\n' "$suite" "$ok" "$bad"
  [ $status -eq 0 ] || tail -5 "$work/$suite.log"
done

echo "== gpt-small, 50 steps"
corpus=$build/examples/textlm/corpus.txt
gpt=$root/models/gpt.tfm
build_gpt() { # NAME tfmc-build-options...
  local name=$1
  shift
  "$tfmc" build "$gpt" "$@" -o "$work/$name" > "$work/build_$name.log" 2>&1 ||
    { echo "  tfmc build $* failed:"; tail -5 "$work/build_$name.log"; }
}
build_gpt gpt_cuda --target cuda --gpu-arch "$arch"
build_gpt gpt_cublas --target cuda --gpu-arch "$arch" --gemm=cublas
build_gpt gpt_cpu
build_gpt gpt_bf16 --target cuda --gpu-arch "$arch" --dtype bf16
build_gpt gpt_cpu_bf16 --dtype bf16
train_timeout=60 # seconds a train run may take
train() { # NAME STEPS: seconds on stdout, empty when it failed; the log in $work/NAME.STEPS
  local t0 t1
  t0=$(date +%s.%N)
  if ! timeout "$train_timeout" "$work/$1" train --data "$corpus" --steps "$2" --log-every 50 \
         > "$work/$1.$2" 2>&1; then
    echo "  $1 train --steps $2 failed:" >&2
    tail -3 "$work/$1.$2" >&2
    return
  fi
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }'
}
# (time of 55 steps - time of 5) / 50: start-up and module loading cancel.
# The driver compiles a module's PTX at its first load and caches the
# result: an untimed first run keeps that compilation out of both.
step_time() { # NAME -> seconds a step
  local short long
  train "$1" 1 > /dev/null
  short=$(train "$1" 5)
  long=$(train "$1" 55)
  [ -n "$short" ] && [ -n "$long" ] && awk -v l="$long" -v s="$short" 'BEGIN { print (l - s) / 50 }'
}
loss50() { awk '/^step 50\// { print $4 }' "$work/$1" 2> /dev/null; }
step=$(step_time gpt_cuda)
gpu_loss=$(loss50 gpt_cuda.55)
cublas_step=$(step_time gpt_cublas)
cublas_loss=$(loss50 gpt_cublas.55)
train gpt_cpu 50 > /dev/null
cpu_loss=$(loss50 gpt_cpu.50)
bf16_step=$(step_time gpt_bf16)
bf16_loss=$(loss50 gpt_bf16.55)
train gpt_cpu_bf16 50 > /dev/null
cpu_bf16_loss=$(loss50 gpt_cpu_bf16.50)
if [ $keep_logs = yes ] && [ -x "$work/gpt_cuda" ]; then
  timeout 60 "$work/gpt_cuda" train --data "$corpus" --steps 13 --profile > "$work/profile.log" 2>&1
fi

echo "== gpt-small over NCCL, one rank"
nccl_lib='' nccl_row="skipped: no libnccl.so.2 (apt-get install libnccl2, or pip install nvidia-nccl-cu12)"
if ! ldconfig -p 2> /dev/null | grep 'libnccl\.so\.2 ' > /dev/null; then # not -q: pipefail and SIGPIPE
  nccl_lib=$(python3 -c 'import os, nvidia.nccl as n; print(os.path.join(list(n.__path__)[0], "lib"))' 2> /dev/null)
  [ -n "$nccl_lib" ] && [ -f "$nccl_lib/libnccl.so.2" ] || nccl_lib=none
fi
if [ "$nccl_lib" != none ]; then
  build_gpt gpt_dp --target cuda --gpu-arch "$arch" --data-parallel
  nccl_train() { # NAME OPTIONS...: the metrics in $work/NAME.jsonl
    local name=$1
    shift
    LD_LIBRARY_PATH=${nccl_lib:+$nccl_lib:}${LD_LIBRARY_PATH:-} timeout 120 "$work/gpt_dp" train \
      --data "$corpus" --steps 20 --seed 3 --log-every 1 --metrics "$work/$name.jsonl" "$@" \
      > "$work/$name.log" 2>&1 || { echo "  gpt_dp train $* failed:"; tail -3 "$work/$name.log"; }
  }
  nccl_train dp_plain
  nccl_train dp_nccl --data-parallel
  nccl_row=$(python3 - "$work/dp_plain.jsonl" "$work/dp_nccl.jsonl" 2> /dev/null <<'PY'
import json, sys
def losses(path):
    return {r["step"]: r["loss"] for r in map(json.loads, open(path)) if r.get("kind") == "step"}
a, b = losses(sys.argv[1]), losses(sys.argv[2])
if len(a) != 20 or a.keys() != b.keys():
    sys.exit(1)
worst = max(abs(a[s] - b[s]) / abs(a[s]) for s in a)
same = "bit for bit" if a == b else "largest relative difference %.1e" % worst
print("%s vs %s at step 20, %s (%s)" % (b[20], a[20], same, "yes" if worst <= 1e-6 else "NO"))
PY
) || nccl_row="failed (NO)"
  case $nccl_row in *"(yes)") passed=$((passed + 1)) ;; *) failed=$((failed + 1)) ;; esac
fi
echo "  $nccl_row"

ms() { [ -n "$1" ] && awk -v s="$1" 'BEGIN { printf "%.2f ms", s * 1000 }' || echo failed; }
python=python3
has_torch() { "$python" -c 'import torch, sys; sys.exit(not torch.cuda.is_available())' 2> /dev/null; }
if ! has_torch && [ -n "$wheels" ]; then
  echo "== PyTorch from the wheels in $wheels"
  if python3 -m venv "$work/venv" > "$work/venv.log" 2>&1 &&
     "$work/venv/bin/python" -m pip install --no-index --find-links "$wheels" torch \
       >> "$work/venv.log" 2>&1; then
    python=$work/venv/bin/python
  else
    echo "  could not install torch from $wheels:"; tail -3 "$work/venv.log"
  fi
fi
torch_step='' torch_row="no PyTorch with CUDA here"
if has_torch; then
  echo "== PyTorch eager, the same step"
  torch_step=$(timeout 120 "$python" "$root/bench/torch_gpt_cuda.py" 2> "$work/torch.log" |
               awk '/^median step/ { print $3 / 1000 }')
  torch_row=$(ms "$torch_step")
fi

echo "== GPT-2 124M, bf16: tfm against PyTorch eager and torch.compile"
gpt2=$root/models/gpt2.tfm
build_gpt2() { # NAME tfmc-build-options...
  local name=$1
  shift
  "$tfmc" build "$gpt2" -D p_drop=0 "$@" -o "$work/$name" > "$work/build_$name.log" 2>&1 ||
    { echo "  tfmc build gpt2.tfm $* failed:"; tail -5 "$work/build_$name.log"; }
}
small2=(-D layers=2 -D d_model=128 -D heads=4 -D seq_len=128 -D batch=8 -D vocab=512)
build_gpt2 gpt2_bf16 --target cuda --gpu-arch "$arch" --dtype bf16
build_gpt2 gpt2_small_gpu "${small2[@]}" --target cuda --gpu-arch "$arch" --dtype bf16
build_gpt2 gpt2_small_cpu "${small2[@]}" --dtype bf16
train_timeout=180
train gpt2_small_gpu 50 > /dev/null
train gpt2_small_cpu 50 > /dev/null
gpt2_loss=$(loss50 gpt2_small_gpu.50) gpt2_cpu_loss=$(loss50 gpt2_small_cpu.50)
train gpt2_bf16 1 > /dev/null # the driver compiles the PTX once (cached)
best() { printf '%s\n' "$@" | awk 'NF && ($1 < m || m == "") { m = $1 } END { print m }'; }
peer() { # MODE: seconds a step, empty when it failed
  has_torch || return 0
  timeout 240 "$python" "$root/bench/torch_gpt2_cuda.py" "$1" 10 2>> "$work/torch_gpt2_$1.log" |
    awk '/median step/ { print $4 / 1000 }'
}
gpt2_steps=() eager_steps=() compile_steps=()
for round in 1 2; do # alternating, so that neither side gets a cooler GPU
  # a GPU is lent for 10 minutes: a second round only while 3 remain
  if [ "$round" -gt 1 ] && [ $(($(date +%s) - start)) -gt 420 ]; then
    echo "  round $round skipped: past 7 minutes"
    break
  fi
  short=$(train gpt2_bf16 3) long=$(train gpt2_bf16 13) t=''
  [ -n "$short" ] && [ -n "$long" ] && t=$(awk -v l="$long" -v s="$short" 'BEGIN { print (l - s) / 10 }')
  e=$(peer eager) c=$(peer compile)
  gpt2_steps+=("$t") eager_steps+=("$e") compile_steps+=("$c")
  echo "  round $round: tfm ${t:-failed} s, eager ${e:-none} s, torch.compile ${c:-none} s a step"
done
gpt2_step=$(best "${gpt2_steps[@]}") eager_step=$(best "${eager_steps[@]}")
compile_step=$(best "${compile_steps[@]}")
if [ $keep_logs = yes ] && [ -x "$work/gpt2_bf16" ]; then
  timeout 120 "$work/gpt2_bf16" train --data "$corpus" --steps 3 --profile > "$work/gpt2_profile.log" 2>&1
fi
gpt2_params=$("$tfmc" stats "$gpt2" | awk '$1 == "total" { gsub(",", "", $2); print $2 }')
gpt2_tokens=$((8 * 1024))

params=$("$tfmc" stats "$gpt" | awk '$1 == "total" { gsub(",", "", $2); print $2 }')
tokens=$((16 * 128))
agrees() { # LOSS CPU_LOSS RELATIVE_TOLERANCE
  awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && b != "" && d <= t * (b < 0 ? -b : b)) }'
}
verdict() { agrees "$1" "$2" "$3" && echo yes || echo NO; }
ratio() { [ -n "$1" ] && [ -n "$2" ] && awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }' || echo -; }
tflops() { [ -n "$1" ] && awk -v p="$params" -v t="$tokens" -v s="$1" 'BEGIN { printf "%.3f", 6 * p * t / s / 1e12 }' || echo -; }
agree=$(verdict "$gpu_loss" "$cpu_loss" 1e-3)
cublas_agree=$(verdict "$cublas_loss" "$cpu_loss" 1e-3)
bf16_agree=$(verdict "$bf16_loss" "$cpu_bf16_loss" 1e-2)
gpt2_agree=$(verdict "$gpt2_loss" "$gpt2_cpu_loss" 1e-2)
for a in "$agree" "$cublas_agree" "$bf16_agree" "$gpt2_agree"; do
  if [ "$a" = yes ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
done

gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2> /dev/null | head -1)
case $gpu_name in # dense bf16 tensor-core peak, TFLOP/s
  *H100* | *H200*) peak=989 ;;
  *A100*) peak=312 ;;
  *) peak='' ;;
esac
mfu() { # STEP_SECONDS: 6 x params x tokens / step / peak, in %
  [ -n "$1" ] && [ -n "$peak" ] &&
    awk -v p="$gpt2_params" -v t="$gpt2_tokens" -v s="$1" -v k="$peak" \
      'BEGIN { printf "%.1f%%", 100 * 6 * p * t / s / (k * 1e12) }' || echo -
}
echo
echo "| GPU checks ($arch, ${gpu_name:-unknown GPU}) | result |"
echo "|-----------------------------------------|--------|"
printf '| compiled vs evaluator checks passed      | %d of %d |\n' "$passed" $((passed + failed))
printf '| gpt-small loss at step 50, GPU vs CPU    | %s vs %s (%s) |\n' "${gpu_loss:--}" "${cpu_loss:--}" "$agree"
printf '| gpt-small loss, --gemm=cublas vs CPU     | %s vs %s (%s) |\n' "${cublas_loss:--}" "${cpu_loss:--}" "$cublas_agree"
printf '| gpt-small loss, --dtype bf16, GPU vs CPU | %s vs %s (%s) |\n' "${bf16_loss:--}" "${cpu_bf16_loss:--}" "$bf16_agree"
printf '| gpt-small step time                      | %s |\n' "$(ms "$step")"
printf '| gpt-small step time, --gemm=cublas       | %s |\n' "$(ms "$cublas_step")"
printf '| gpt-small step time, --dtype bf16        | %s |\n' "$(ms "$bf16_step")"
printf '| gpt-small, 1-rank NCCL vs plain (20 steps) | %s |\n' "$nccl_row"
printf '| PyTorch eager step (torch_gpt_cuda.py)   | %s |\n' "$torch_row"
printf '| step time / PyTorch, tiled; cuBLAS       | %s; %s |\n' "$(ratio "$step" "$torch_step")" "$(ratio "$cublas_step" "$torch_step")"
printf '| achieved TFLOP/s (6 x %s params x %d tokens), tiled; cuBLAS | %s; %s |\n' "$params" "$tokens" "$(tflops "$step")" "$(tflops "$cublas_step")"
printf '| GPT-2 small config loss at step 50, bf16, GPU vs CPU | %s vs %s (%s) |\n' "${gpt2_loss:--}" "${gpt2_cpu_loss:--}" "$gpt2_agree"
printf '| GPT-2 124M bf16 step, tfm (CUDA graph)   | %s |\n' "$(ms "$gpt2_step")"
printf '| GPT-2 124M bf16 step, PyTorch eager; torch.compile | %s; %s |\n' \
  "$( [ -n "$eager_step" ] && ms "$eager_step" || echo none)" \
  "$( [ -n "$compile_step" ] && ms "$compile_step" || echo none)"
printf '| GPT-2 124M tfm / torch.compile (goal <= 0.80) | %s |\n' "$(ratio "$gpt2_step" "$compile_step")"
printf '| GPT-2 124M MFU (6 x %s params x %d tokens / step / %s TFLOP/s), tfm; eager; compile | %s; %s; %s |\n' \
  "$gpt2_params" "$gpt2_tokens" "${peak:-unknown}" "$(mfu "$gpt2_step")" "$(mfu "$eager_step")" \
  "$(mfu "$compile_step")"
printf '| wall time                                | %d s |\n' $(($(date +%s) - start))
[ "$failed" -eq 0 ]
