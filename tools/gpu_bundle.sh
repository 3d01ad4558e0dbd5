#!/usr/bin/env bash
# The GPU checks on a machine that has a GPU and a C compiler but no LLVM
# (a GPU server's usual image): build here, copy the checkout there, run.
#
#   tools/gpu_bundle.sh            here: a Release build in build-gpu/ of
#                                  what tests/gpu/run.sh runs, and in
#                                  build-gpu/bundle/ libLLVM with the
#                                  libraries it needs (xz, about 40 MB) and
#                                  CUDA's libdevice
#   tools/gpu_bundle.sh --run [run.sh options]
#                                  there, from the copied checkout: unpacks
#                                  the libraries the machine lacks, puts the
#                                  checkout at the path the build has
#                                  compiled in (a symbolic link), finds
#                                  cuBLAS, then tests/gpu/run.sh --prebuilt
#                                  build-gpu [options]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build-gpu
bundle=$build/bundle

if [ "${1:-}" != "--run" ]; then
  [ $# -eq 0 ] || { echo "usage: tools/gpu_bundle.sh [--run [run.sh options]]" >&2; exit 2; }
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release > /dev/null
  ninja -C "$build" tfmc tfmrt tfmrt_main codegen_ops codegen_gemm codegen_fusion \
    codegen_train codegen_bf16 codegen_models
  rm -rf "$bundle" && mkdir -p "$bundle/libs"
  # libLLVM and every library it loads but the C runtime's own.
  ldd "$build/compiler/tfmc" | awk '$3 ~ /^\// { print $3 }' | while read -r lib; do
    case $(basename "$lib") in
    libc.so.* | libm.so.* | libstdc++.so.* | libgcc_s.so.* | libz.so.* | liblzma.so.* | \
      libtinfo.so.* | ld-linux*) ;;
    *) cp -L "$lib" "$bundle/libs/" ;;
    esac
  done
  tar -C "$bundle" -cJf "$bundle/libs.tar.xz" libs && rm -r "$bundle/libs"
  # CUDA's libdevice next to the ptxas configure found (compiler/codegen/CMakeLists.txt)
  ptxas=$(sed -n 's/^TFM_PTXAS:FILEPATH=//p' "$build/CMakeCache.txt")
  libdevice=$(dirname "${ptxas:-/nonexistent/ptxas}")/../nvvm/libdevice/libdevice.10.bc
  [ ! -f "$libdevice" ] || cp "$libdevice" "$bundle/libdevice.10.bc"
  echo "$root" > "$bundle/source_dir"
  du -sh "$build" | awk '{ print "build-gpu/: " $1 "; copy the checkout with it to the GPU machine" }'
  exit 0
fi

shift
[ -f "$bundle/libs.tar.xz" ] || { echo "no bundle in $bundle: run tools/gpu_bundle.sh here first" >&2; exit 2; }
built_at=$(cat "$bundle/source_dir")
if [ "$built_at" != "$root" ]; then
  [ ! -e "$built_at" ] || [ -L "$built_at" ] ||
    { echo "$built_at exists and is not this checkout: run from there" >&2; exit 2; }
  mkdir -p "$(dirname "$built_at")" && ln -sfn "$root" "$built_at"
fi
libs=$(mktemp -d)
trap 'rm -rf "$libs"' EXIT
tar -C "$libs" -xJf "$bundle/libs.tar.xz"
for lib in "$libs"/libs/*; do # the machine's own where it has them
  name=$(basename "$lib")
  case $name in libLLVM*) continue ;; esac
  if ldconfig -p | grep -q " $name "; then rm "$lib"; fi
done
cublas=$(find /usr/local/cuda*/ /usr/lib/x86_64-linux-gnu -name 'libcublas.so.1[0-9]' 2> /dev/null |
         head -1 || true)
export LD_LIBRARY_PATH="$libs/libs${cublas:+:$(dirname "$cublas")}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
[ ! -f "$bundle/libdevice.10.bc" ] || export TFM_LIBDEVICE="$bundle/libdevice.10.bc"
"$build/compiler/tfmc" --version > /dev/null ||
  { echo "the bundled tfmc does not start here:" >&2; ldd "$build/compiler/tfmc" | grep 'not found' >&2; exit 1; }
"$root/tests/gpu/run.sh" --prebuilt "$build" "$@"
