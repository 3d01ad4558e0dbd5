# shellcheck shell=bash disable=SC2154  # root and work come from the caller
# Sourced by bench/gpt_step.sh and bench/decode_timing.sh (not run): sets
# `venv` to the virtual environment that holds the PyPI peers (PyTorch 2.x,
# JAX, transformers).
#   TFM_BENCH_VENV set: that environment, used as it is (nothing installed).
#   otherwise: build-bench-venv/ in the repository root, made the first time
#   with `pip install torch numpy "jax[cpu]" transformers` from PyPI (several
#   GB). If no registry answers, it says so and the caller runs the peers
#   that are installed.
# Needs `root` (the repository root) and `work` (a scratch folder).
bench_packages=(torch numpy "jax[cpu]" transformers)
if [ -n "${TFM_BENCH_VENV:-}" ]; then
  venv=$TFM_BENCH_VENV
  if [ ! -x "$venv/bin/python" ]; then
    echo "$(basename "$0"): TFM_BENCH_VENV=$venv has no bin/python" >&2
    exit 1
  fi
else
  venv=$root/build-bench-venv
  # .tfm-complete marks a finished install, so an interrupted one is retried.
  if [ ! -e "$venv/.tfm-complete" ]; then
    echo "making $venv: pip install ${bench_packages[*]} from PyPI (several GB, once)"
    if [ ! -x "$venv/bin/python" ] && ! python3 -m venv "$venv"; then
      echo "$(basename "$0"): python3 -m venv $venv failed (Debian: apt-get install python3-venv)" >&2
      exit 1
    fi
    if "$venv/bin/pip" install --retries 2 --timeout 60 "${bench_packages[@]}" >"$work/pip.log" 2>&1; then
      touch "$venv/.tfm-complete"
    else
      tail -n 5 "$work/pip.log" >&2
      echo "$(basename "$0"): pip could not install ${bench_packages[*]} into $venv" \
        "(no package registry answered?); running the peers that are installed" >&2
    fi
  fi
fi
