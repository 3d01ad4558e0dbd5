#!/usr/bin/env bash
# The seq2seq experiment (README.md): builds the four models with tfmc,
# trains each for 3 seeds on the bundled synthetic task, scores greedy
# translations of the test set (BLEU and exact match) and prints the table;
# writes the training curves of every run (curves.html, tools/report.py) and
# the attention maps of models (a) and (d) for a test pair as pages
# (attention_a.html, attention_d.html; docs/pictures.md), and saves the
# cross-attention weights of model (a) for a few test pairs.
#   usage: examples/seq2seq/run.sh [BUILD_DIR]   (default: build)
# Environment: STEPS_A, STEPS_B, STEPS_C, STEPS_D (training steps per model),
# SEEDS (default "1 2 3"), THREADS (default 2), OUT (default BUILD_DIR/seq2seq_run).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
tfmc=$build/compiler/tfmc
gen=$build/examples/seq2seq/seq2seq_gen
attention=$build/examples/seq2seq/seq2seq_attention
out=${OUT:-$build/seq2seq_run}
seeds=${SEEDS:-1 2 3}
threads=${THREADS:-2}
for tool in "$tfmc" "$gen" "$attention"; do
  [ -x "$tool" ] || { echo "run.sh: $tool is missing; build the project first (ninja -C $build)" >&2; exit 2; }
done
mkdir -p "$out"
start=$(date +%s)
"$gen" "$out" --test 300
echo "data: $(wc -l < "$out/train.tsv") training pairs, $(wc -l < "$out/test.tsv") test pairs in $out"

models=(a b c d)
declare -A label=([a]="(a) Transformer, decoder sees all encoder states"
                  [b]="(b) Transformer, memory = enc[:, :1]"
                  [c]="(c) LSTM encoder-decoder, no attention"
                  [d]="(d) GRU encoder-decoder, additive attention")
declare -A build_args=([a]="$root/examples/seq2seq/transformer.tfm"
                       [b]="$root/examples/seq2seq/transformer.tfm -D memory=first"
                       [c]="$root/examples/seq2seq/rnn.tfm"
                       [d]="$root/examples/seq2seq/rnn.tfm --variant gru_additive")
declare -A steps=([a]=${STEPS_A:-800} [b]=${STEPS_B:-800} [c]=${STEPS_C:-400} [d]=${STEPS_D:-150})

for m in "${models[@]}"; do
  # shellcheck disable=SC2086  # the build arguments are split on purpose
  /usr/bin/time -f "%e" -o "$out/$m.build_seconds" "$tfmc" build ${build_args[$m]} -o "$out/model_$m"
  echo "built $m in $(cat "$out/$m.build_seconds") s: ${label[$m]}"
done

declare -A bleu exact
for m in "${models[@]}"; do
  for s in $seeds; do
    ckpt=$out/$m.seed$s.ckpt
    t0=$(date +%s)
    rm -f "$out/$m.seed$s.metrics.jsonl"
    "$out/model_$m" train --data "$out/train.tsv" --test "$out/test.tsv" --steps "${steps[$m]}" \
      --seed "$s" --save "$ckpt" --threads "$threads" --log-every 50 \
      --metrics "$out/$m.seed$s.metrics.jsonl" > "$out/$m.seed$s.train.log"
    t1=$(date +%s)
    # eval prints "exact match: N / M = P%" and "bleu B (...)" (greedy translations).
    "$out/model_$m" eval --load "$ckpt" --test "$out/test.tsv" --threads "$threads" \
      > "$out/$m.seed$s.eval.log"
    b=$(grep '^bleu' "$out/$m.seed$s.eval.log" | awk '{print $2}')
    e=$(grep '^exact match' "$out/$m.seed$s.eval.log" | grep -o '[0-9.]*%' | tr -d %)
    e=$(awk -v e="$e" 'BEGIN { printf "%.4f", e / 100 }')
    bleu[$m.$s]=$b
    exact[$m.$s]=$e
    loss=$(grep '^step' "$out/$m.seed$s.train.log" | tail -1 | awk '{print $4}')
    echo "$m seed $s: ${steps[$m]} steps in $((t1 - t0)) s, final loss $loss, BLEU $b, exact match $e"
  done
done

# The cross-attention weights of (a), seed 1, for the first test pairs.
head -4 "$out/test.tsv" > "$out/attention_pairs.tsv"
"$out/model_a" translate --load "$out/a.seed1.ckpt" --test "$out/attention_pairs.tsv" \
  --dump cross_attention --dump-file "$out/cross_attention_a.safetensors" > /dev/null
"$attention" "$out/cross_attention_a.safetensors" > "$out/cross_attention_a.txt"
echo "cross-attention weights of (a) for 4 test pairs: $out/cross_attention_a.safetensors"
echo "  (shown as text in $out/cross_attention_a.txt)"

# Pictures: the attention of (a) and (d) for the first test pair, and every
# run's loss and held-out loss against steps and wall time.
pair=$(head -1 "$out/test.tsv")
"$out/model_a" attention --load "$out/a.seed1.ckpt" --text "$pair" --html "$out/attention_a.html" \
  --layer decoder.cross_attn.weights --threads "$threads" > /dev/null
"$out/model_d" attention --load "$out/d.seed1.ckpt" --text "$pair" --html "$out/attention_d.html" \
  --threads "$threads" > /dev/null
runs=()
for m in "${models[@]}"; do
  for s in $seeds; do runs+=("$m.seed$s=$out/$m.seed$s.metrics.jsonl"); done
done
python3 "$root/tools/report.py" "${runs[@]}" -o "$out/curves.html" \
  --title "seq2seq experiment: models (a)-(d), seeds $seeds" > /dev/null
echo "pages: $out/attention_a.html, $out/attention_d.html (attention), $out/curves.html (curves)"

echo
echo "| model | steps | test BLEU (mean) | exact match (mean) | BLEU per seed | exact match per seed |"
echo "|---|---|---|---|---|---|"
for m in "${models[@]}"; do
  per_b="" per_e="" sum_b=0 sum_e=0 n=0
  for s in $seeds; do
    per_b+="${per_b:+ / }${bleu[$m.$s]}"
    per_e+="${per_e:+ / }${exact[$m.$s]}"
    sum_b=$(awk -v a="$sum_b" -v b="${bleu[$m.$s]}" 'BEGIN { print a + b }')
    sum_e=$(awk -v a="$sum_e" -v b="${exact[$m.$s]}" 'BEGIN { print a + b }')
    n=$((n + 1))
  done
  awk -v l="${label[$m]}" -v st="${steps[$m]}" -v b="$sum_b" -v e="$sum_e" -v n="$n" \
      -v pb="$per_b" -v pe="$per_e" \
      'BEGIN { printf "| %s | %d | %.3f | %.3f | %s | %s |\n", l, st, b / n, e / n, pb, pe }'
done
echo
echo "total: $(( $(date +%s) - start )) s with $threads threads"
