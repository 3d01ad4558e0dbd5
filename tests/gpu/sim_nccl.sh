#!/usr/bin/env bash
# The NCCL path of data-parallel training (runtime/train_nccl.c) on the PTX
# simulator (SIM_DIR: its libcuda.so.1) with the fake libnccl.so.2 in
# NCCL_DIR (tests/gpu/sim/nccl.c), a small gpt built --target cuda
# --data-parallel:
#  - one process through the data-parallel loop (train --data-parallel: a
#    one-rank NCCL communicator, gradients averaged on the device in
#    several buckets) gives the same bits as the plain step: the same
#    losses and gradient norms, the same checkpoint;
#  - without NCCL (TFM_NCCL_LIBRARY names a file that is not there: this
#    machine may have a real one on its library path) it exits 1 saying
#    what to install, in one process and under mpirun; --zero 1 is refused;
#  - 2 ranks under mpirun (the fake NCCL exchanging over MPI) agree with one
#    process of twice the batch to 1e-6 in the losses of 3 steps.
# usage: sim_nccl.sh TFMC MODEL CORPUS SIM_DIR NCCL_DIR WORKDIR   (exit 77: skipped)
set -u
tfmc=$1 model=$2 corpus=$3 sim=$4 nccl=$5 work=$6
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
fail() { echo "FAIL: $1"; [ -n "${2:-}" ] && cat "$2"; exit 1; }
head -c 100000 "$corpus" > corpus.txt
config=(-D vocab=80 -D d_model=32 -D heads=2 -D layers=2 -D seq_len=8)
"$tfmc" build "$model" "${config[@]}" -D batch=2 --target cuda --data-parallel -o dp2 || exit 1
export LD_LIBRARY_PATH=$sim:$nccl
train=(train --data corpus.txt --steps 3 --seed 3 --threads 1 --log-every 1)
# the fields of every step that must not change: loss, grad_norm, test_loss
numbers() { python3 -c 'import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("kind") == "step": print(r["step"], r["loss"], r.get("grad_norm"), r.get("test_loss"))' "$1"; }

./dp2 "${train[@]}" --metrics plain.jsonl --save plain.safetensors > plain.log 2>&1 ||
  fail "one process, the plain step" plain.log
TFM_DIST_BUCKET_MB=0.002 ./dp2 "${train[@]}" --data-parallel --metrics nccl.jsonl \
  --save nccl.safetensors > nccl.log 2>&1 || fail "one process over NCCL" nccl.log
grep -q "NCCL on the GPUs, .* in [1-9][0-9]* buckets" nccl.log || fail "no NCCL report" nccl.log
grep -q "in 1 buckets" nccl.log && fail "one bucket: the test asks for several" nccl.log
[ "$(numbers plain.jsonl)" = "$(numbers nccl.jsonl)" ] && [ -n "$(numbers nccl.jsonl)" ] ||
  { diff <(numbers plain.jsonl) <(numbers nccl.jsonl); fail "a one-rank NCCL run changed the numbers"; }
cmp plain.safetensors nccl.safetensors || fail "a one-rank NCCL run changed the checkpoint"
echo "ok: one rank over NCCL ($(grep -o '[0-9]* buckets' nccl.log)) = the plain step, bit for bit: $(numbers nccl.jsonl | tr '\n' ' ')"

TFM_NCCL_LIBRARY=$work/absent/libnccl.so.2 ./dp2 "${train[@]}" --data-parallel > absent.log 2>&1
status=$?
[ $status = 1 ] || fail "without NCCL: exit $status, not 1" absent.log
grep -q "error: a --target cuda binary trains data-parallel over NCCL: NCCL not found (libnccl.so.2): install" absent.log ||
  fail "without NCCL: no clear message" absent.log
echo "ok: without NCCL: $(cat absent.log)"

command -v mpirun >/dev/null 2>&1 || { echo "SKIP: no mpirun for 2 ranks"; exit 77; }
ldd ./dp2 | grep -q libmpi || { echo "SKIP: tfm was built without MPI"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" # Open MPI's: see data_parallel.sh
export OMPI_MCA_btl=${OMPI_MCA_btl:-self,tcp} OMPI_MCA_btl_tcp_if_include=${OMPI_MCA_btl_tcp_if_include:-lo}
export OMPI_MCA_oob_tcp_if_include=${OMPI_MCA_oob_tcp_if_include:-lo}
mpi=(mpirun --oversubscribe -np 2 -x LD_LIBRARY_PATH)
TFM_NCCL_LIBRARY=$work/absent/libnccl.so.2 "${mpi[@]}" -x TFM_NCCL_LIBRARY ./dp2 "${train[@]}" \
  > absent2.log 2>&1 && fail "2 ranks without NCCL trained" absent2.log
grep -q "NCCL not found (libnccl.so.2)" absent2.log || fail "2 ranks without NCCL: no clear message" absent2.log
echo "ok: 2 ranks without NCCL refuse"
"${mpi[@]}" ./dp2 "${train[@]}" --zero 1 > zero.log 2>&1 && fail "2 GPU ranks trained with --zero 1" zero.log
grep -q -- "--zero 1 is not implemented for a --target cuda binary" zero.log ||
  fail "--zero 1 on GPUs: no clear refusal" zero.log
echo "ok: --zero 1 on GPUs refuses"

"$tfmc" build "$model" "${config[@]}" -D batch=4 --target cuda -o one4 || exit 1
./one4 "${train[@]}" --metrics one4.jsonl --save one4.safetensors > one4.log 2>&1 ||
  fail "one process of batch 4" one4.log
"${mpi[@]}" ./dp2 "${train[@]}" --metrics two.jsonl --save two.safetensors > two.log 2>&1 ||
  fail "2 ranks over NCCL" two.log
# losses only: the simulated dots round to tf32, in another order for
# another batch, which moves tiny params by more than 1e-6 relative
python3 - one4.jsonl two.jsonl <<'PY' || fail "2 ranks over NCCL differ from one process of twice the batch"
import json, sys
def losses(path):
    return {r["step"]: r["loss"] for r in map(json.loads, open(path)) if r.get("kind") == "step"}
a, b = losses(sys.argv[1]), losses(sys.argv[2])
worst = max(abs(a[s] - b[s]) / abs(a[s]) for s in a) if a.keys() == b.keys() and a else 1.0
print("2 ranks over NCCL vs 1 process, batch 4: largest relative loss difference %.1e" % worst)
sys.exit(worst > 1e-6)
PY
echo "ok: 2 ranks over NCCL = 1 process of twice the batch (losses of 3 steps, 1e-6)"
