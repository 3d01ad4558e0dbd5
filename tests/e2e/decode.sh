#!/usr/bin/env bash
# The decode-step graph (key/value cache) against recomputing the window.
#   usage: decode.sh TFMC MODEL CORPUS WORK equal|timing
# equal: a small gpt trained 300 steps; greedy generate with the cache
# gives the same 200 characters as --recompute (and as the forward graph
# past the context), sampled ones too for the same --seed; a seed
# reproduces a sample; temperature 0 and top-k 1 are greedy; bad input is
# refused. timing: gpt with seq_len 1024; the time per new token after a
# prompt of 1000 characters is within 1.5x of that after 10 (best of 3 runs
# of 20 tokens each; attention's share grows with the prefix, fully masked
# key blocks being skipped, the rest of a step does not).
set -euo pipefail
tfmc=$1 model=$2 corpus=$3 work=$4 mode=$5
rm -rf "$work" && mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
if [ "$mode" = timing ]; then
  # gpt's default width (256, 4 layers, vocab 1024), batch 1, a window of 1024.
  "$tfmc" build "$model" -D seq_len=1024 -D batch=1 -o "$work/gpt"
  "$work/gpt" train --data "$corpus" --steps 2 --save "$work/ck" --threads 2 > /dev/null
  per_token() { # PROMPT_LENGTH RUNS TOKENS [FLAG]: ms per new token (the best of RUNS)
    local prompt best=""
    prompt=$(head -c 100000 "$corpus" | tr -d '\n' | head -c "$1")
    for run in $(seq "$2"); do
      local t
      t=$("$work/gpt" generate --load "$work/ck" --prompt "$prompt" --length "$3" --timing --threads 2 ${4:-} \
          2>&1 >/dev/null | sed -n 's/.* \([0-9.]*\) ms per new token$/\1/p')
      [ -n "$t" ] || fail "no timing line"
      best=$(awk -v a="$best" -v b="$t" 'BEGIN { print (a == "" || b < a) ? b : a }')
    done
    echo "$best"
  }
  short=$(per_token 10 3 20) long=$(per_token 1000 3 20)
  echo "ms per new token: prefix 10: $short, prefix 1000: $long"
  awk -v s="$short" -v l="$long" 'BEGIN { exit !(l <= 1.5 * s) }' ||
    fail "a token after 1000 costs more than 1.5x one after 10"
  echo "ok: cost per token independent of the prefix (ratio $(awk -v s="$short" -v l="$long" 'BEGIN { printf "%.2f", l / s }'))"
  echo "for comparison, --recompute: prefix 10: $(per_token 10 1 4 --recompute), prefix 1000: $(per_token 1000 1 4 --recompute) ms per new token"
  exit 0
fi
"$tfmc" build "$model" -D vocab=128 -D d_model=32 -D heads=2 -D layers=2 -D seq_len=256 -D batch=2 -D learning_rate=3e-3 \
  -o "$work/gpt"
"$work/gpt" train --data "$corpus" --steps 300 --save "$work/ck" --threads 2 --log-every 300 > /dev/null
gen() { "$work/gpt" generate --load "$work/ck" --threads 2 "$@"; }
prompt="The model "
cached=$(gen --prompt "$prompt" --length 200)
again=$(gen --prompt "$prompt" --length 200 --recompute)
[ "$cached" = "$again" ] || fail "greedy: the cache gives '$cached', recomputing '$again'"
[ "$(printf %s "$cached" | wc -c)" -ge 210 ] || fail "greedy: too short: '$cached'"
echo "ok: greedy, 200 characters: the cache equals recomputing: $(printf %s "$cached" | head -c 70)..."
[ "$(gen --prompt "$prompt" --length 200 --temperature 0)" = "$cached" ] || fail "temperature 0 is not greedy"
[ "$(gen --prompt "$prompt" --length 200 --top-k 1)" = "$cached" ] || fail "top-k 1 is not greedy"
# Past the context (256): the window slides, through the forward graph.
[ "$(gen --prompt "$prompt" --length 300)" = "$(gen --prompt "$prompt" --length 300 --recompute)" ] ||
  fail "past the context the cache and recomputing differ"
s1=$(gen --prompt "$prompt" --length 200 --temperature 0.9 --top-p 0.95 --seed 5)
[ "$s1" = "$(gen --prompt "$prompt" --length 200 --temperature 0.9 --top-p 0.95 --seed 5)" ] ||
  fail "the same seed gave another sample"
[ "$s1" = "$(gen --prompt "$prompt" --length 200 --temperature 0.9 --top-p 0.95 --seed 5 --recompute)" ] ||
  fail "sampling: the cache and recomputing differ"
[ "$s1" != "$(gen --prompt "$prompt" --length 200 --temperature 0.9 --top-p 0.95 --seed 6)" ] ||
  fail "another seed gave the same sample"
[ "$s1" != "$cached" ] || fail "sampling gave the greedy text"
echo "ok: sampling reproducible with --seed, equal with the cache and recomputing"
refused() { # WHAT EXPECTED_EXIT MESSAGE ARGS...
  local what=$1 code=$2 message=$3; shift 3
  local got status=0
  got=$("$work/gpt" "$@" 2>&1) || status=$?
  [ "$status" = "$code" ] && echo "$got" | grep -qF -- "$message" ||
    fail "$what: exit $status, expected $code and '$message': $got"
}
long=$(head -c 300 /dev/zero | tr '\0' 'a')
refused "a prompt longer than the context" 1 "the prompt is 300 characters but model gpt's context is 256" \
  generate --load "$work/ck" --prompt "$long"
refused "top-p 0" 2 "--top-p needs a probability in (0, 1], not '0'" generate --load "$work/ck" --top-p 0
refused "top-p 1.5" 2 "--top-p needs a probability in (0, 1]" generate --load "$work/ck" --top-p 1.5
refused "top-p nan" 2 "--top-p needs a probability in (0, 1]" generate --load "$work/ck" --top-p nan
refused "top-p x" 2 "--top-p needs a probability" generate --load "$work/ck" --top-p x
refused "top-k 0" 2 "--top-k needs a positive integer" generate --load "$work/ck" --top-k 0
refused "top-k -3" 2 "--top-k needs a non-negative integer" generate --load "$work/ck" --top-k -3
refused "temperature -1" 2 "--temperature needs a number from 0" generate --load "$work/ck" --temperature -1
refused "temperature inf" 2 "--temperature needs a number from 0" generate --load "$work/ck" --temperature inf
refused "sampling for eval" 2 "are for generate" eval --load "$work/ck" --test "$corpus" --top-k 3
refused "generate --beam" 1 "--beam and --dump are for translate" generate --load "$work/ck" --beam 2
echo "ok: bad input refused"
