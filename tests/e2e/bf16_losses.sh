#!/usr/bin/env bash
# Acceptance check 3 of #28: the losses of 50 training steps of a gpt.tfm
# built with --dtype bf16 stay within 1e-2 of the f32 build's, step by
# step, on the kernel family TFM_CPU_KERNELS names (ctest runs this once per
# family). A family this CPU lacks is skipped (exit 77).
# usage: bf16_losses.sh F32_BINARY BF16_BINARY CORPUS WORKDIR
set -eu
f32=$1 bf16=$2 corpus=$3 work=$4
family=${TFM_CPU_KERNELS:?TFM_CPU_KERNELS names the family under test}
rm -rf "$work" && mkdir -p "$work"
steps=50
if ! "$bf16" train --data "$corpus" --steps $steps --log-every 1 > "$work/bf16.log" 2> "$work/bf16.err"; then
  if grep -q "has no" "$work/bf16.err"; then
    echo "skipped: no $family on this CPU ($(cat "$work/bf16.err"))"
    exit 77
  fi
  cat "$work/bf16.err"
  exit 1
fi
"$f32" train --data "$corpus" --steps $steps --log-every 1 > "$work/f32.log"
# A name that is no family is refused before any step, with the names.
if TFM_CPU_KERNELS=avx1024 "$bf16" train --data "$corpus" --steps 1 > /dev/null 2> "$work/bad.err" ||
   ! grep -q 'TFM_CPU_KERNELS is "avx1024": expected amx, avx512bf16 or avx2' "$work/bad.err"; then
  echo "FAIL: TFM_CPU_KERNELS=avx1024 was not refused clearly: $(cat "$work/bad.err")"
  exit 1
fi
losses() { awk '$1 == "step" { split($2, s, "/"); print s[1], $4 }' "$1"; }
join <(losses "$work/f32.log") <(losses "$work/bf16.log") > "$work/losses"
awk -v steps=$steps -v family="$family" '
  { n++; d = $3 - $2; if (d < 0) d = -d; if (d > worst) { worst = d; at = $1 }
    if (d > 0.01) { print "FAIL: step " $1 " loss f32 " $2 ", bf16 (" family ") " $3; bad = 1 } }
  END {
    if (n != steps) { print "FAIL: " n " steps of losses, expected " steps; exit 1 }
    if (bad) exit 1
    printf "ok: %d steps, bf16 (%s) within %.4f of f32 (largest at step %d)\n", n, family, worst, at
  }' "$work/losses"
