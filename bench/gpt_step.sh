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
# Per-step time measured as the peer measures its own: 3 warm-up steps, then
# the median of the next 10 steps' times, each the time between two progress
# lines (--log-every 1 flushes one line per step). A difference of two whole
# runs (13 steps - 3 steps) also carried start-up's noise (reading the corpus,
# initialising), which once made a round's step 0.043 s.
step_median() {
  "$work/gpt" train --data "$corpus" --steps 13 --log-every 1 | {
    local line stamps=()
    # Only the time is taken while the binary runs; the arithmetic waits.
    while IFS= read -r line; do
      case $line in step*) stamps+=("$EPOCHREALTIME") ;; esac
    done
    # stamps[i] ends step i + 1: steps 4..13 are the differences after stamps[2..11].
    printf '%s\n' "${stamps[@]:2:11}" |
      awk 'NR > 1 { print $1 - prev } { prev = $1 }' |
      sort -g | awk '{ a[NR] = $1 } END { print a[int(NR / 2) + 1] }' # the upper median, as torch_gpt.py's
  }
}
peer_env=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OPENBLAS_NUM_THREADS=2)
echo "PyTorch's OpenBLAS kernel: $("${peer_env[@]}" /usr/bin/python3 -c \
  'import ctypes, torch; f = ctypes.CDLL("libopenblas.so.0").openblas_get_corename
f.restype = ctypes.c_char_p; print(f().decode())' \
  2>/dev/null || echo unknown)"
ours=() theirs=()
for r in $(seq "$rounds"); do
  ours+=("$(step_median)")
  t=$("${peer_env[@]}" /usr/bin/python3 "$peer" 1 | sed -n 's/.*median step \([0-9.]*\) ms.*/\1/p')
  theirs+=("$(awk -v t="$t" 'BEGIN { print t / 1000 }')")
  echo "round $r: tfm $(printf '%.3f' "${ours[-1]}") s/step, PyTorch $(printf '%.3f' "${theirs[-1]}") s/step"
done
median() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
mo=$(median "${ours[@]}") mt=$(median "${theirs[@]}")
printf 'median: tfm %.3f s/step, PyTorch eager %.3f s/step, ratio tfm/PyTorch %.2f\n' "$mo" "$mt" \
  "$(awk -v a="$mo" -v b="$mt" 'BEGIN { print a / b }')"
