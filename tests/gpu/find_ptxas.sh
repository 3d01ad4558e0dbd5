# Sourced by the ptxas tests: sets $ptxas ($TFM_PTXAS, else the one on PATH,
# else the CUDA toolkit's) and a scratch $work removed on exit; with no
# working ptxas, says so and exits 77 (ctest: skipped).
ptxas=${TFM_PTXAS:-$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)}
if ! "$ptxas" --version > /dev/null 2>&1; then
  echo "skipped: no ptxas to assemble PTX with (install the CUDA toolkit)"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
