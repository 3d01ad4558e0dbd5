#!/usr/bin/env bash
# Parameter counts of the bundled models against the figures in SPEC.md and
# the front-end issue (computed by hand there, not by tfm).
# usage: model_stats.sh TFMC MODELS_DIR
set -u
tfmc=$1 models=$2
fail=0
expect_total() { # expected-count description args...
  local want=$1 what=$2
  shift 2
  local got
  got=$("$tfmc" stats "$@" | awk '$1 == "total" { print $2 }')
  if [ "$got" = "$want" ]; then
    echo "ok: $what: $got"
  else
    echo "FAIL: $what: got '$got', expected $want"
    fail=1
  fi
}
expect_total 63,082,496 "transformer base, vocab 37000" "$models/transformer.tfm" -D vocab=37000
# big: 6 x 12,596,224 (encoder) + 6 x 16,796,672 (decoder) + 37,000 x 1024 (embedding)
expect_total 214,245,376 "transformer big" "$models/transformer.tfm" --variant big
expect_total 3,454,464 "gpt L=4 d=256 h=4 V=1024 T=128" "$models/gpt.tfm" -D layers=4 \
  -D d_model=256 -D heads=4 -D vocab=1024 -D seq_len=128
# FLOPs per step of gpt-small, by hand: per token and layer, the projections
# 2 * (4 d^2 + 2 d d_ff) = 1,572,864 and attention 2 * 2 * T * d = 131,072;
# times 4 layers and 2,048 tokens, plus the logits 2 * 2048 * 256 * 1024:
# 15,032,385,536 forward; training (forward + two backward products) 3x.
gpt_flops=$("$tfmc" stats "$models/gpt.tfm" | awk '$1 == "forward" || $1 == "train" { print $1, $5 }' | tr '\n' ' ')
if [ "$gpt_flops" = "forward 15.032 train 45.097 " ]; then
  echo "ok: gpt-small GFLOP per step: $gpt_flops"
else
  echo "FAIL: gpt-small GFLOP per step: got '$gpt_flops', expected 'forward 15.032 train 45.097'"
  fail=1
fi
# Table 3 rows are overrides; each must still check.
for args in "-D heads=1" "-D heads=4" "-D heads=16" "-D heads=32" "-D d_k=16" "-D d_k=32" \
            "-D layers=2" "-D layers=8" "-D d_model=256" "-D d_model=1024 -D heads=16" \
            "-D d_ff=1024" "-D d_ff=4096" "-D p_drop=0.0" "-D p_drop=0.2" "-D smoothing=0.0" \
            "-D smoothing=0.2" "-D pos=learned" "-D norm=pre"; do
  # shellcheck disable=SC2086
  if "$tfmc" check "$models/transformer.tfm" $args > /dev/null; then
    echo "ok: transformer $args checks"
  else
    echo "FAIL: transformer $args does not check"
    fail=1
  fi
done
# Overrides apply whatever their order, also to entries others depend on.
if "$tfmc" check "$models/gpt.tfm" -D d_ff=512 -D d_model=128 | grep -q '^  d_model *= 128 '; then
  echo "ok: -D d_ff=512 -D d_model=128 sets d_model"
else
  echo "FAIL: -D d_model=128 after -D d_ff=512 was not applied"
  fail=1
fi
exit $fail
