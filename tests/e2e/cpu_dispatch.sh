#!/usr/bin/env bash
# tfmc build --cpu generic-dispatch (compiler/codegen/cpu/dispatch.c,
# runtime/cpu_kernels.c): one binary for every x86-64 level from AVX2 on.
#  - every variant this machine runs trains (TFM_CPU_VARIANT forces it),
#    and their losses agree (f32: 1e-4 relative; bf16: 1e-2); a variant it
#    cannot run is refused clearly and reported as skipped;
#  - the variant chosen by itself is the best one (same bits as forcing it);
#  - under an emulated Haswell (qemu-x86_64 -cpu Haswell, where qemu-user is
#    installed) the same binary chooses avx2 and gives the same bits as the
#    avx2 variant here, refuses avx512, and an emulated CPU without AVX2 is
#    refused with a message naming what is missing;
#  - emit and --target cuda refuse the option.
# usage: cpu_dispatch.sh TFMC MODEL CORPUS WORKDIR SANITIZED(0|1)
set -u
tfmc=$1 model=$2 corpus=$3 work=$4 sanitized=$5
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
head -c 50000 "$corpus" > corpus.txt
tiny=(-D vocab=256 -D d_model=32 -D heads=2 -D layers=1 -D seq_len=16 -D batch=4)
train=(train --data corpus.txt --steps 20 --seed 5 --threads 2 --log-every 10)

# losses FILE: the losses of a --metrics file, one a line, as written.
losses() { grep '"kind":"step"' "$1" | sed 's/.*"loss":\([^,]*\),.*/\1/'; }

# agree A B TOL: the losses of metrics A and B agree to TOL relative.
agree() {
  paste <(losses "$1") <(losses "$2") | awk -v tol="$3" -v a="$1" -v b="$2" '
    { d = $1 - $2; if (d < 0) d = -d; m = ($2 < 0 ? -$2 : $2); if (m < 1) m = 1
      if (d / m > worst) worst = d / m; n++ }
    END { if (n < 2) { print "FAIL: too few losses in " a; exit 1 }
          printf "%s vs %s: %d losses, largest relative difference %.3g\n", a, b, n, worst
          exit worst > tol }'
}

# emit shows one variant; the GPU build has no CPU variants: both refused (exit 2)
"$tfmc" emit llvm "$model" --cpu generic-dispatch > /dev/null 2> refused_emit
[ $? = 2 ] && grep -q "goes with build for the CPU" refused_emit || fail "emit --cpu generic-dispatch"
"$tfmc" build "$model" --cpu generic-dispatch --target cuda -o never 2> refused_cuda
[ $? = 2 ] && [ ! -e never ] || fail "build --target cuda --cpu generic-dispatch"

for dtype in f32 bf16; do
  tol=1e-4; [ "$dtype" = bf16 ] && tol=1e-2
  "$tfmc" build "$model" "${tiny[@]}" --dtype "$dtype" --cpu generic-dispatch -o "gd_$dtype" ||
    fail "build --cpu generic-dispatch --dtype $dtype"
  ran=()
  for v in avx2 avx512 amx; do
    if ! TFM_CPU_VARIANT=$v "./gd_$dtype" info > "info_$v" 2> "refused_$v"; then
      grep -q "TFM_CPU_VARIANT=$v: this machine cannot run it" "refused_$v" ||
        fail "$v refused without the reason: $(cat "refused_$v")"
      echo "skipped: variant $v ($dtype): $(cat "refused_$v")"
      continue
    fi
    grep -q "^cpu variant: $v " "info_$v" || fail "info does not name variant $v"
    TFM_CPU_VARIANT=$v "./gd_$dtype" "${train[@]}" --metrics "m_${dtype}_$v.jsonl" \
      --save "c_${dtype}_$v.safetensors" > /dev/null || fail "training on variant $v ($dtype)"
    ran+=("$v")
    [ "$v" = avx2 ] || agree "m_${dtype}_avx2.jsonl" "m_${dtype}_$v.jsonl" "$tol" ||
      fail "$v and avx2 disagree ($dtype)"
  done
  [ "${ran[0]:-}" = avx2 ] || fail "this machine runs no variant (not even avx2)"
  best=${ran[${#ran[@]}-1]}
  "./gd_$dtype" info | grep -q "^cpu variant: $best " || fail "the binary did not choose $best"
  "./gd_$dtype" "${train[@]}" --save "c_${dtype}_auto.safetensors" > /dev/null || fail "train"
  cmp -s "c_${dtype}_auto.safetensors" "c_${dtype}_$best.safetensors" ||
    fail "the variant chosen by itself is not $best"
done

if [ "$sanitized" = 1 ]; then
  echo "skipped: the emulated CPUs (AddressSanitizer's shadow memory does not map under qemu-user)"
elif ! command -v qemu-x86_64 > /dev/null; then
  echo "skipped: the emulated CPUs (no qemu-x86_64: apt-get install qemu-user)"
else
  emulate() { qemu-x86_64 -cpu "$@" 2> >(grep -v "TCG doesn't support" >&2); }
  emulate Haswell ./gd_f32 info | grep -q "^cpu variant: avx2 " ||
    fail "under an emulated Haswell the binary did not choose avx2"
  emulate Haswell ./gd_f32 "${train[@]}" --save c_haswell.safetensors > /dev/null ||
    fail "training under an emulated Haswell"
  cmp -s c_haswell.safetensors c_f32_avx2.safetensors ||
    fail "an emulated Haswell's run differs from the avx2 variant's here"
  ! TFM_CPU_VARIANT=avx512 emulate Haswell ./gd_f32 info > /dev/null 2> refused_haswell &&
    grep -q "TFM_CPU_VARIANT=avx512: this machine cannot run it (the best it runs is avx2)" \
      refused_haswell || fail "avx512 forced on Haswell: $(cat refused_haswell)"
  ! emulate Nehalem ./gd_f32 info > /dev/null 2> refused_nehalem &&
    grep -q "needs AVX2 and FMA" refused_nehalem || fail "a CPU without AVX2: $(cat refused_nehalem)"
  echo "emulated Haswell: avx2 chosen, same bits as here; avx512 and a CPU without AVX2 refused"
fi
echo "PASS"
