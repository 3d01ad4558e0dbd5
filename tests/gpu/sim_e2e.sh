#!/usr/bin/env bash
# Both models, and the recurrent encoder-decoder, built with --target cuda
# run on the PTX simulator as their --target cpu builds do.
#
# A small gpt with dropout (p_drop 0.1: the GPU draws the CPU's masks) and
# 4 layers (its Adam kernels take over 64 buffers) built with --target cuda runs on the PTX simulator (SIM_DIR
# holds its libcuda.so.1 and libcublas.so.13) as its --target cpu build
# does: the same loss at every step of 3, within 2e-4 in f32 (4 decimals
# printed; the GPU's dots round to tf32), with --gemm=cublas too, and within
# 1e-2 with --dtype bf16 (as tests/gpu/run.sh holds a GPU to the CPU: 8
# bits, different sums). In f32 the GPU build also trains 2 steps, saves,
# resumes to step 3, evaluates that checkpoint (the held-out loss within
# 2e-4 of the CPU's) and generates from it. This runs the GPU path end to
# end without a GPU: the host code's launches, the device arena (params and
# optimizer states kept on the device, the update copied there, brought
# back for a checkpoint, written after a load), and every kernel's PTX.
#
# A small Transformer (models/transformer.tfm --variant small, narrower)
# trains 3 steps on examples/numbers within 1e-3 of the CPU's losses (its
# tf32 dots move them by 3e-4), saves, and translates 4 held-out pairs
# (greedy decoding: the forward graphs run once a token) with the CPU's
# held-out loss (within 1e-3) and the CPU's translations.
#
# examples/seq2seq/rnn.tfm (GRU with additive attention, narrower) trains
# 3 steps within 2e-4 of the CPU's losses and beam-searches (width 3) the
# held-out pairs among the first 4 that fit src_len to the CPU's
# translations and log-probabilities (within 1e-4).
# usage: sim_e2e.sh TFMC MODELS_DIR CORPUS NUMBERS_DATA_DIR SEQ2SEQ_DIR SEQ2SEQ_GEN SIM_DIR WORKDIR
#   SEQ2SEQ_DIR: examples/seq2seq in the source tree; SEQ2SEQ_GEN: its data generator
set -eu
tfmc=$1 model=$2/gpt.tfm transformer=$2/transformer.tfm corpus=$3 numbers=$4 seq2seq=$5
seq2seq_gen=$6 sim=$7 work=$8
rm -rf "$work" && mkdir -p "$work"
config=(-D vocab=80 -D d_model=32 -D heads=2 -D layers=4 -D seq_len=8 -D batch=2 -D p_drop=0.1)
head -c 3000 "$corpus" > "$work/test.txt" # eval reads its last 10%
losses() { awk '/^step / { split($2, s, "/"); print "step" s[1], $4 }' "$1"; }
gpu() { LD_LIBRARY_PATH=$sim "$@"; }
# agree NAME GPU_LINES CPU_LINES TOLERANCE COUNT: "label value" lines, pairwise
agree() {
  if ! paste <(echo "$2") <(echo "$3") |
       awk -v tol="$4" -v n="$5" '{ k++; d = $2 - $4; if ($1 != $3 || d > tol || -d > tol) bad = 1 }
                                  END { exit bad || k != n }'; then
    echo "FAIL: $1: the simulated GPU's numbers differ from the CPU's:"
    paste <(echo "$2") <(echo "$3")
    exit 1
  fi
  echo "ok: $1 as the CPU's (within $4): $(echo "$2" | tr '\n' ' ')"
}
fail() { echo "FAIL: $1:"; cat "$2"; exit 1; }
for variant in f32::2e-4 f32:--gemm=cublas:2e-4 bf16::1e-2; do
  IFS=: read -r dtype gemm tolerance <<< "$variant"
  name=$dtype${gemm:+_cublas}
  "$tfmc" build "$model" "${config[@]}" --dtype "$dtype" --target cuda $gemm -o "$work/gpu_$name"
  "$tfmc" build "$model" "${config[@]}" --dtype "$dtype" -o "$work/cpu_$name"
  gpu "$work/gpu_$name" train --data "$corpus" --steps 3 --log-every 1 > "$work/gpu_$name.log" 2>&1 ||
    fail "$name: the cuda build" "$work/gpu_$name.log"
  "$work/cpu_$name" train --data "$corpus" --steps 3 --log-every 1 --save "$work/cpu_$name.ckpt" \
    > "$work/cpu_$name.log" 2>&1
  agree "$name ${gemm:-(generated dots)}: losses of 3 steps" "$(losses "$work/gpu_$name.log")" \
    "$(losses "$work/cpu_$name.log")" "$tolerance" 3
done

ckpt=$work/gpu.ckpt
gpu "$work/gpu_f32" train --data "$corpus" --steps 2 --log-every 1 --save "$ckpt" > "$work/save.log" 2>&1 ||
  fail "f32: train 2 steps and save" "$work/save.log"
gpu "$work/gpu_f32" train --data "$corpus" --steps 3 --log-every 1 --save "$ckpt" --resume \
  > "$work/resume.log" 2>&1 || fail "f32: resume to step 3" "$work/resume.log"
grep -q "^resuming from .* at step 2" "$work/resume.log" || fail "f32: no resume" "$work/resume.log"
agree "f32: steps 1-2, saved, then step 3 resumed" \
  "$(losses "$work/save.log"; losses "$work/resume.log")" "$(losses "$work/cpu_f32.log")" 2e-4 3
heldout() { awk '/^held-out loss:/ { print "held-out", $3 }' "$1"; }
gpu "$work/gpu_f32" eval --load "$ckpt" --test "$work/test.txt" > "$work/eval.log" 2>&1 ||
  fail "f32: eval" "$work/eval.log"
"$work/cpu_f32" eval --load "$work/cpu_f32.ckpt" --test "$work/test.txt" > "$work/cpu_eval.log" 2>&1
agree "f32: eval of the resumed checkpoint" "$(heldout "$work/eval.log")" \
  "$(heldout "$work/cpu_eval.log")" 2e-4 1
gpu "$work/gpu_f32" generate --load "$ckpt" --prompt "The " --length 12 > "$work/generate.log" 2>&1 ||
  fail "f32: generate" "$work/generate.log"
grep -q "^The " "$work/generate.log" || fail "f32: generate printed no continuation" "$work/generate.log"
echo "ok: f32: generate from the checkpoint: $(head -1 "$work/generate.log")"

# translator NAME MODEL TRAIN TEST COMMAND [OPTIONS...]: MODEL built with
# config for the GPU and the CPU, each trained 3 steps on TRAIN and saved,
# then running COMMAND on TEST from its checkpoint; the logs are
# $work/{gpu,cpu}_NAME.log and $work/{gpu,cpu}_NAME.COMMAND.log.
translator() {
  local name=$1 model=$2 train=$3 test=$4 command=$5 target
  shift 5
  "$tfmc" build "$model" "${config[@]}" --target cuda -o "$work/gpu_$name"
  "$tfmc" build "$model" "${config[@]}" -o "$work/cpu_$name"
  for target in gpu cpu; do
    local run=()
    [ $target = cpu ] || run=(gpu)
    "${run[@]}" "$work/${target}_$name" train --data "$train" --steps 3 --log-every 1 \
      --save "$work/$target.$name.ckpt" > "$work/${target}_$name.log" 2>&1 ||
      fail "$name: $target training" "$work/${target}_$name.log"
    "${run[@]}" "$work/${target}_$name" "$command" --load "$work/$target.$name.ckpt" \
      --test "$test" "$@" > "$work/${target}_$name.$command.log" 2>&1 ||
      fail "$name: $target $command" "$work/${target}_$name.$command.log"
  done
}

config=(--variant small -D d_model=32 -D heads=2 -D d_ff=64 -D batch=4)
head -4 "$numbers/test.tsv" > "$work/test.tsv"
translator transformer "$transformer" "$numbers/train.tsv" "$work/test.tsv" eval --show 4
agree "transformer: losses of 3 steps" "$(losses "$work/gpu_transformer.log")" \
  "$(losses "$work/cpu_transformer.log")" 1e-3 3
gpu_eval=$work/gpu_transformer.eval.log cpu_eval=$work/cpu_transformer.eval.log
agree "transformer: held-out loss" "$(heldout "$gpu_eval")" "$(heldout "$cpu_eval")" 1e-3 1
translations() { grep -- ' ->  ' "$1"; }
[ "$(translations "$gpu_eval")" = "$(translations "$cpu_eval")" ] &&
  [ "$(translations "$gpu_eval" | wc -l)" -eq 4 ] ||
  { echo "FAIL: transformer: translations differ:"; paste "$gpu_eval" "$cpu_eval"; exit 1; }
echo "ok: transformer: the 4 greedy translations are the CPU's"

config=(--variant gru_additive -D d_emb=16 -D d=32 -D batch=4 -D src_len=12 -D tgt_len=12)
mkdir -p "$work/seq2seq" && "$seq2seq_gen" "$work/seq2seq" > /dev/null
head -4 "$work/seq2seq/test.tsv" > "$work/seq2seq/test4.tsv" # pairs over src_len are left out
translator rnn "$seq2seq/rnn.tfm" "$work/seq2seq/train.tsv" "$work/seq2seq/test4.tsv" translate \
  --beam 3 --scores
agree "rnn: losses of 3 steps" "$(losses "$work/gpu_rnn.log")" "$(losses "$work/cpu_rnn.log")" 2e-4 3
# "source -> translation (expected: ...) [logp L, score S]": the text, then the log-probability
beams() { sed -n 's/^\(.*\) *\[logp .*/\1/p' "$1"; }
logps() { sed -n 's/.*\[logp \([-0-9.e]*\),.*/logp \1/p' "$1"; }
gpu_beam=$work/gpu_rnn.translate.log cpu_beam=$work/cpu_rnn.translate.log
pairs=$(beams "$cpu_beam" | wc -l)
[ "$(beams "$gpu_beam")" = "$(beams "$cpu_beam")" ] && [ "$pairs" -ge 2 ] ||
  { echo "FAIL: rnn: beam search translations differ:"; paste "$gpu_beam" "$cpu_beam"; exit 1; }
agree "rnn: beam search (width 3) of $pairs pairs, the CPU's translations; their log-probabilities" \
  "$(logps "$gpu_beam")" "$(logps "$cpu_beam")" 1e-4 "$pairs"
