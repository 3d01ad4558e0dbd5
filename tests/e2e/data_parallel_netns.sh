#!/usr/bin/env bash
# Data-parallel training across two "hosts": two network namespaces made
# here, joined by a veth pair with private addresses that exist only inside
# them (10.77.0.1 and 10.77.0.2), one rank in each, Open MPI's TCP
# transport; mpirun starts the remote rank with `ip netns exec` in place of
# ssh (plm_rsh_agent). The losses must agree with one process of the same
# global batch as on one host. All traffic stays on this machine.
# usage: data_parallel_netns.sh TFMC MODEL CORPUS WORKDIR   (exit 77: skipped)
set -u
tfmc=$1 model=$2 corpus=$3 work=$4
here=$(cd "$(dirname "$0")" && pwd)
command -v mpirun >/dev/null 2>&1 || { echo "SKIP: no mpirun"; exit 77; }
a=tfmdp$$a b=tfmdp$$b
cleanup() { ip netns del "$a" 2>/dev/null; ip netns del "$b" 2>/dev/null; }
trap cleanup EXIT
if ! { ip netns add "$a" && ip netns add "$b" &&
       ip link add "v$$a" netns "$a" type veth peer name "v$$b" netns "$b" &&
       ip -n "$a" addr add 10.77.0.1/24 dev "v$$a" && ip -n "$b" addr add 10.77.0.2/24 dev "v$$b" &&
       ip -n "$a" link set "v$$a" up && ip -n "$b" link set "v$$b" up &&
       ip -n "$a" link set lo up && ip -n "$b" link set lo up; } 2>/dev/null; then
  echo "SKIP: cannot make network namespaces here (needs root and ip netns)"
  exit 77
fi
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
head -c 100000 "$corpus" > corpus.txt
tiny=(-D vocab=256 -D d_model=16 -D heads=2 -D layers=1 -D seq_len=8)
"$tfmc" build "$model" "${tiny[@]}" -D batch=4 --data-parallel -o dp4 || exit 1
"$tfmc" build "$model" "${tiny[@]}" -D batch=8 -o one8 || exit 1
ldd ./dp4 | grep -q libmpi || { echo "SKIP: tfm was built without MPI"; exit 77; }
# the "ssh" of host 10.77.0.2: a shell in namespace b
cat > agent <<AGENT
#!/bin/sh
host=\$1; shift
echo "\$host" >> agent.log
exec ip netns exec $b sh -c "\$*"
AGENT
chmod +x agent
printf '10.77.0.1 slots=1\n10.77.0.2 slots=1\n' > hosts
train=(train --data "$PWD/corpus.txt" --steps 20 --seed 3 --threads 1 --log-every 1)
./one8 "${train[@]}" --metrics one --save one.safetensors > one.log || exit 1
ip netns exec "$a" env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  timeout 240 mpirun --allow-run-as-root -np 2 --hostfile hosts --mca plm_rsh_agent "$PWD/agent" \
  --mca btl self,tcp --mca btl_tcp_if_include 10.77.0.0/24 --mca oob_tcp_if_include 10.77.0.0/24 \
  -x TFM_DIST_TIMEOUT=60 --wdir "$PWD" \
  ./dp4 "${train[@]}" --metrics two --save two.safetensors > two.log 2>&1
status=$?
tail -3 two.log
[ -s agent.log ] || { echo "FAIL: mpirun did not start a rank in the second namespace"; exit 1; }
echo "the rank on $(head -1 agent.log) was started in namespace $b"
[ "$status" -eq 0 ] || { cat two.log; echo "FAIL: mpirun across the namespaces (status $status)"; exit 1; }
python3 "$here/dp_compare.py" --skip attn.bk one two one.safetensors two.safetensors ||
  { echo "FAIL: 2 hosts and 1 process disagree"; exit 1; }
echo "ok: one rank in each of two network namespaces (10.77.0.1, 10.77.0.2) over TCP agrees with 1 process"
