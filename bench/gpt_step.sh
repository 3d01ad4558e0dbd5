#!/usr/bin/env bash
# One training step (forward, backward, AdamW) of models/gpt.tfm compiled by
# tfm, f32 and --dtype bf16, against the peers a user runs, in the same run,
# alternating, medians of ROUNDS rounds:
#   torch-eager, torch-compile          PyTorch 2.x from PyPI, f32
#   torch-eager-bf16, torch-compile-bf16   the same under bf16 autocast
#   jax, jax-bf16                       JAX jit (f32; bf16 products)
#   debian-torch                        PyTorch 1.13 from Debian (/usr/bin/python3),
#                                       eager f32, kept for history; gpt-small only
# The PyPI peers are ../shared/bench/peers_gpt.py MODE 2 (2 threads, their best
# on 2 cores), the Debian one ../shared/bench/torch_gpt.py 1 with
# OPENBLAS_NUM_THREADS=2 (its best); tfm runs as it does by default. Each
# runner's figure is the median of 10 steps after 3 warm-up steps (which
# include torch.compile's and jit's compile time). Ratios printed: tfm f32 /
# each f32 peer, tfm bf16 / each bf16 peer.
#
# Same model: tfmc stats' parameter count must equal the count each peer
# trains (printed by bench/peer_run.py), or the script stops. Known
# differences that remain: tfm's gpt.tfm clips the gradient norm at 1.0 (one
# extra reduction per step) and has weight decay 0; the peers clip nothing.
#
# usage: bench/gpt_step.sh [--config gpt-small|gpt-medium] [--peers LIST] TFMC [ROUNDS]
#   --config gpt-small   models/gpt.tfm defaults: L=4 d=256 h=4 V=1024 T=128 B=16
#                        (3,454,464 parameters); the default
#   --config gpt-medium  L=6 d=512 h=8 V=1024 T=256 B=8 (19,570,688 parameters)
#   --peers LIST         comma-separated subset of the peers above (default: all
#                        that are installed); tfm f32 and bf16 always run
#   ROUNDS               default 3
# Environment:
#   TFM_BENCH_VENV  an existing virtual environment with torch / jax to use as
#                   it is (nothing is installed into it). Without it the script
#                   uses build-bench-venv/ in the repository root, making it
#                   the first time with `pip install torch numpy "jax[cpu]"
#                   transformers` from PyPI (several GB; bench/bench_venv.sh,
#                   shared with bench/decode_timing.sh). If no registry
#                   answers, it says so and runs the peers it has (at least
#                   Debian's PyTorch).
# Not a test: machines here are noisy; the figures go to bench/RESULTS.md.
set -euo pipefail

usage() { sed -n '2,/^# Not a test/s/^# \{0,1\}//p' "$0"; }
config=gpt-small peers=
while [ $# -gt 0 ]; do
  case $1 in
    --config) config=${2:?--config needs gpt-small or gpt-medium}; shift 2 ;;
    --peers) peers=${2:?--peers needs a list}; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    -*) echo "gpt_step.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) break ;;
  esac
done
if [ $# -lt 1 ] || [ $# -gt 2 ]; then usage >&2; exit 2; fi
tfmc=$1 rounds=${2:-3}
case $rounds in '' | *[!0-9]* | 0) echo "gpt_step.sh: ROUNDS must be a positive number, not '$rounds'" >&2; exit 2 ;; esac
case $config in
  gpt-small) gpt_config="4 256 4 1024 128 16" ;;
  gpt-medium) gpt_config="6 512 8 1024 256 8" ;;
  *) echo "gpt_step.sh: --config is gpt-small or gpt-medium, not '$config'" >&2; exit 2 ;;
esac
read -r L C H V T B <<<"$gpt_config"
# The same numbers for tfm (d_ff = 4 * d_model is the model's own default).
defines=(-D "layers=$L" -D "d_model=$C" -D "heads=$H" -D "vocab=$V" -D "seq_len=$T" -D "batch=$B")

root=$(cd "$(dirname "$0")/.." && pwd)
here=$root/bench
shared=$root/../shared/bench # beside the repository, in CI clones as here
peers_gpt=$shared/peers_gpt.py torch_gpt=$shared/torch_gpt.py
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

all_peers=(torch-eager torch-compile torch-eager-bf16 torch-compile-bf16 jax jax-bf16 debian-torch)
if [ -n "$peers" ]; then
  IFS=, read -r -a wanted <<<"$peers"
  for p in "${wanted[@]}"; do
    case " ${all_peers[*]} " in *" $p "*) ;; *) echo "gpt_step.sh: unknown peer '$p' (peers: ${all_peers[*]})" >&2; exit 2 ;; esac
  done
else
  wanted=("${all_peers[@]}")
fi

# --- The PyPI peers' virtual environment (sets venv) -----------------------
# shellcheck source=bench/bench_venv.sh
. "$here/bench_venv.sh"
has() { "$1" -c "import $2" >/dev/null 2>&1; }
available=()
for p in "${wanted[@]}"; do
  case $p in
    torch-*) has "$venv/bin/python" torch && available+=("$p") || echo "skipped $p: no torch in $venv" ;;
    jax*) has "$venv/bin/python" jax && available+=("$p") || echo "skipped $p: no jax in $venv" ;;
    debian-torch)
      if [ "$config" != gpt-small ]; then
        echo "skipped debian-torch: torch_gpt.py is gpt-small only (and PyTorch 1.13 lacks peers_gpt.py's scaled_dot_product_attention)"
      elif has /usr/bin/python3 torch; then
        available+=("$p")
      else
        echo "skipped debian-torch: no torch under /usr/bin/python3 (apt-get install python3-torch libopenblas0-pthread)"
      fi ;;
  esac
done

# --- Versions and BLAS / oneDNN builds of each peer -------------------------
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; load average at start: $load_start"
versions='
import sys
try:
    import torch
    print("  torch", torch.__version__)
    for l in torch.__config__.show().splitlines():
        if any(w in l for w in ("Math Kernel", "MKL-DNN", "oneDNN", "CPU capability")):
            print("   ", l.strip())
        for w in l.replace(",", " ").split():
            if w.startswith("BLAS_INFO="):
                print("    -", w)
except ImportError:
    pass
try:
    import jax, jaxlib
    print("  jax", jax.__version__, "jaxlib", jaxlib.__version__)
except ImportError:
    if "torch" not in sys.modules:
        print("  neither torch nor jax installed")
'
echo "PyPI peers ($venv):"
"$venv/bin/python" -c "$versions" 2>/dev/null || true
# Debian's peer runs at its best: OpenBLAS picks its own kernel (an
# OPENBLAS_CORETYPE or OPENBLAS_L2_SIZE that the machine sets, e.g. to keep
# older OpenBLAS builds on a safe kernel, is removed for it; on the AVX-512
# machines here Haswell's AVX2 kernel made PyTorch's step 1.5x slower).
debian_env=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OPENBLAS_NUM_THREADS=2)
case " ${available[*]} " in *" debian-torch "*)
  echo "Debian peer (/usr/bin/python3):"
  /usr/bin/python3 -c "$versions" 2>/dev/null || true
  echo "    OpenBLAS kernel: $("${debian_env[@]}" /usr/bin/python3 -c \
    'import ctypes, torch; f = ctypes.CDLL("libopenblas.so.0").openblas_get_corename
f.restype = ctypes.c_char_p; print(f().decode())' 2>/dev/null || echo unknown)" ;;
esac

# --- tfm ----------------------------------------------------------------------
corpus=$work/corpus.txt
# Any text works: the step time does not depend on the data.
for _ in $(seq 200); do cat "$root/README.md"; done >"$corpus"
stats=$("$tfmc" stats "$root/models/gpt.tfm" "${defines[@]}") || { echo "gpt_step.sh: $tfmc stats failed" >&2; exit 1; }
params=$(awk '$1 == "total" { gsub(",", "", $2); print $2 }' <<<"$stats")
[ -n "$params" ] || { echo "gpt_step.sh: tfmc stats printed no parameter total" >&2; exit 1; }
echo "config $config: L=$L d=$C h=$H V=$V T=$T B=$B, tfm's model has $params parameters"
"$tfmc" build "$root/models/gpt.tfm" "${defines[@]}" -o "$work/gpt-f32"
"$tfmc" build "$root/models/gpt.tfm" "${defines[@]}" --dtype bf16 -o "$work/gpt-bf16"

# Per-step time measured as the peers measure their own: 3 warm-up steps, then
# the median of the next 10 steps' times, each the time between two progress
# lines (--log-every 1 flushes one line per step). A difference of two whole
# runs (13 steps - 3 steps) also carried start-up's noise (reading the corpus,
# initialising), which once made a round's step 0.043 s.
tfm_step() { # BINARY
  "$1" train --data "$corpus" --steps 13 --log-every 1 | {
    local line stamps=()
    # Only the time is taken while the binary runs; the arithmetic waits.
    while IFS= read -r line; do
      case $line in step*) stamps+=("$EPOCHREALTIME") ;; esac
    done
    # stamps[i] ends step i + 1: steps 4..13 are the differences after stamps[2..11].
    printf '%s\n' "${stamps[@]:2:11}" |
      awk 'NR > 1 { print $1 - prev } { prev = $1 }' |
      sort -g | awk '{ a[NR] = $1 } END { print a[int(NR / 2) + 1] }' # the upper median, as the peers'
  }
}

# --- Peers ---------------------------------------------------------------------
# PEER ROUND -> its median step in seconds; stops the script if the peer
# trains another number of parameters than tfm. The first round's PyTorch
# runs add one step under oneDNN's verbose mode (after the timed ones), whose
# lines say which kernels ran; that output is kept in $work/PEER.kernels.
peer_step() {
  local peer=$1 round=$2 out=$work/$1.out n t
  local verbose=0
  [ "$round" = 1 ] && verbose=1
  case $peer in
    debian-torch) "${debian_env[@]}" TFM_PEER_ONEDNN_STEP=$verbose /usr/bin/python3 "$here/peer_run.py" "$torch_gpt" 1 >"$out" 2>&1 ;;
    *) env GPT_CONFIG="$gpt_config" TFM_PEER_ONEDNN_STEP=$verbose "$venv/bin/python" "$here/peer_run.py" "$peers_gpt" "$peer" 2 >"$out" 2>&1 ;;
  esac || { tail -n 20 "$out" >&2; echo "gpt_step.sh: peer $peer failed (its output above)" >&2; return 1; }
  [ "$verbose" = 0 ] || cp "$out" "$work/$peer.kernels"
  n=$(sed -n 's/^peer params \([0-9]*\)$/\1/p' "$out" | head -n 1)
  if [ "$n" != "$params" ]; then
    echo "gpt_step.sh: $peer trains ${n:-an unknown number of} parameters, tfm's model $params: not the same model" >&2
    return 1
  fi
  t=$(sed -n 's/.*median step \([0-9.]*\) ms.*/\1/p' "$out")
  [ -n "$t" ] || { tail -n 20 "$out" >&2; echo "gpt_step.sh: peer $peer printed no median step" >&2; return 1; }
  awk -v t="$t" 'BEGIN { print t / 1000 }'
}

runners=(tfm-f32 tfm-bf16 "${available[@]}")
declare -A times
for r in $(seq "$rounds"); do
  line="round $r:"
  for x in "${runners[@]}"; do
    case $x in
      tfm-*) t=$(tfm_step "$work/gpt-${x#tfm-}") ;;
      *) t=$(peer_step "$x" "$r") ;;
    esac
    [ -n "$t" ] || { echo "gpt_step.sh: no step time from $x" >&2; exit 1; }
    times[$x]="${times[$x]:-} $t"
    line+=" $x $(printf '%.3f' "$t")"
  done
  echo "$line (s/step)"
done
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

# JAX's oneDNN use, from one extra untimed run with ONEDNN_VERBOSE=1 (XLA
# calls oneDNN from compiled code, so there is no switch for one step).
for x in "${available[@]}"; do
  case $x in jax*)
    env GPT_CONFIG="$gpt_config" ONEDNN_VERBOSE=1 "$venv/bin/python" "$peers_gpt" "$x" 2 >"$work/$x.kernels" 2>&1 || true ;;
  esac
done

# FILE -> the oneDNN primitives executed, by implementation (AMX ones are
# named ...amx..., e.g. brg_matmul:avx10_1_512_amx), or that none ran.
onednn_kernels() {
  awk -F, '$1 == "onednn_verbose" {
      for (i = 1; i < NF; i++) if ($i == "exec") break
      if (i >= NF) next
      k = $(i + 2) ":" ($(i + 3) == "" ? "(ISA not named)" : $(i + 3)); n[k]++; all++
      if ($(i + 3) ~ /amx/) amx++
    }
    END {
      if (!all) { print "no oneDNN primitive ran"; exit }
      s = ""; for (k in n) s = s (s == "" ? "" : ", ") k " x" n[k]
      printf "%d oneDNN executions, %d on AMX: %s\n", all, amx, s
    }' "$1"
}
echo "kernels (PyTorch: one extra step under oneDNN verbose; JAX: a whole extra run, compilation included):"
for x in "${available[@]}"; do
  echo "  $x: $(onednn_kernels "$work/$x.kernels")"
done

median() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
echo
echo "$config, $rounds rounds; load average (1, 5, 15 min) at start $load_start, at the end $load_end"
echo "| runner | s/step by round | median s/step | tfm / runner |"
echo "|---|---|---|---|"
mf32=$(median ${times[tfm-f32]}) mbf16=$(median ${times[tfm-bf16]})
for x in "${runners[@]}"; do
  m=$(median ${times[$x]})
  case $x in
    tfm-*) ratio="" ;;
    *bf16) ratio=$(awk -v a="$mbf16" -v b="$m" 'BEGIN { printf "bf16 %.2f", a / b }') ;;
    *) ratio=$(awk -v a="$mf32" -v b="$m" 'BEGIN { printf "f32 %.2f", a / b }') ;;
  esac
  printf '| %s | %s | %.3f | %s |\n' "$x" "$(printf '%.3f ' ${times[$x]} | sed 's/ $//')" "$m" "$ratio"
done
