#!/usr/bin/env bash
# Builds with warnings as errors and runs the whole test suite (ctest).
# usage: tools/test.sh [--sanitize | --tsan]
#   --sanitize: the same suite built with ASan+UBSan, in build-asan/
#   --tsan: a ThreadSanitizer build of the compiler and runtime, in
#           build-tsan/, and the tests labelled tsan (tfmc build's threads,
#           the runtime's pool)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/tools/deps.sh"
tfm_install_deps
tfm_install_test_tools
build=$root/build-test
flags=(-DTFM_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo)
targets=() # all
# Slow tests (label "slow") are left out of the default suite: ctest -L slow runs them.
tests=(-LE slow)
if [ "${1:-}" = "--sanitize" ]; then
  build=$root/build-asan
  flags+=(-DTFM_SANITIZE=ON)
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
elif [ "${1:-}" = "--tsan" ]; then
  build=$root/build-tsan
  flags+=(-DTFM_TSAN=ON)
  targets=(--target tfmc tfmrt tfmrt_main runtime_threads)
  tests=(-L tsan)
elif [ -n "${1:-}" ]; then
  echo "usage: tools/test.sh [--sanitize | --tsan]" >&2
  exit 2
fi
python=$(tfm_python_with_safetensors "$root/build-pyenv")
[ -z "$python" ] || flags+=(-DPython3_EXECUTABLE="$python")
hf_python=$(tfm_python_with_transformers "$root/build-pyenv-hf")
[ -z "$hf_python" ] || flags+=(-DTFM_HF_PYTHON="$hf_python")
cmake -S "$root" -B "$build" -G Ninja "${flags[@]}" > "$build.configure.log" 2>&1 ||
  { cat "$build.configure.log"; exit 1; }
cmake --build "$build" -j "$(tfm_jobs)" "${targets[@]}"
ctest --test-dir "$build" -j "$(tfm_jobs)" --output-on-failure "${tests[@]}"
