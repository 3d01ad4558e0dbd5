#!/usr/bin/env bash
# One training step (forward, backward, AdamW) of "gpt-small" (models/gpt.tfm
# defaults: L=4, d=256, h=4, d_ff=1024, V=1024, T=128, B=16; 3,454,464
# parameters) compiled by tfm, against PyTorch eager (../shared/bench/torch_gpt.py)
# in the same run, alternating, medians of ROUNDS rounds.
# The peer runs at its best: OpenBLAS picks its own kernel (an
# OPENBLAS_CORETYPE or OPENBLAS_L2_SIZE that the machine sets, e.g. to keep
# older OpenBLAS builds on a safe kernel, is removed for it; on the AVX-512
# machines here Haswell's AVX2 kernel made PyTorch's step 1.5x slower), and
# the kernel it uses is printed.
# usage: bench/gpt_step.sh TFMC [ROUNDS]
set -euo pipefail
tfmc=$1 rounds=${2:-3}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
peer=$root/../shared/bench/torch_gpt.py
corpus=$work/corpus.txt
# Any text works: the step time does not depend on the data.
for i in $(seq 200); do cat "$root/README.md"; done > "$corpus"
"$tfmc" build "$root/models/gpt.tfm" -o "$work/gpt" -v
# Per-step time: (time of 3 + N steps - time of 3 steps) / N, so start-up,
# initialisation and the first steps' warm-up cancel out.
steps_time() {
  local n=$1 start end
  start=$(date +%s.%N)
  OPENBLAS_NUM_THREADS=2 "$work/gpt" train --data "$corpus" --steps "$n" --log-every 100000 > /dev/null
  end=$(date +%s.%N)
  awk -v a="$start" -v b="$end" 'BEGIN { print b - a }'
}
peer_env=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OPENBLAS_NUM_THREADS=2)
echo "PyTorch's OpenBLAS kernel: $("${peer_env[@]}" /usr/bin/python3 -c \
  'import ctypes, torch; f = ctypes.CDLL("libopenblas.so.0").openblas_get_corename
f.restype = ctypes.c_char_p; print(f().decode())' \
  2>/dev/null || echo unknown)"
ours=() theirs=()
for r in $(seq "$rounds"); do
  short=$(steps_time 3)
  long=$(steps_time 13)
  ours+=("$(awk -v l="$long" -v s="$short" 'BEGIN { print (l - s) / 10 }')")
  t=$("${peer_env[@]}" /usr/bin/python3 "$peer" 1 | sed -n 's/.*median step \([0-9.]*\) ms.*/\1/p')
  theirs+=("$(awk -v t="$t" 'BEGIN { print t / 1000 }')")
  echo "round $r: tfm $(printf '%.3f' "${ours[-1]}") s/step, PyTorch $(printf '%.3f' "${theirs[-1]}") s/step"
done
median() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
mo=$(median "${ours[@]}") mt=$(median "${theirs[@]}")
printf 'median: tfm %.3f s/step, PyTorch eager %.3f s/step, ratio tfm/PyTorch %.2f\n' "$mo" "$mt" \
  "$(awk -v a="$mo" -v b="$mt" 'BEGIN { print a / b }')"
