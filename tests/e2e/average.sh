#!/usr/bin/env bash
# average: the mean of two checkpoints' parameters; a checkpoint of another
# model is refused with exit status 1 and a message naming it.
# usage: average.sh BINARY CORPUS WORKDIR OTHER_WRITER
set -u
bin=$1 corpus=$2 work=$3 other=$4
rm -rf "$work" && mkdir -p "$work"
"$bin" train --data "$corpus" --steps 4 --every 2 --keep 2 --save "$work/ck.safetensors" > /dev/null || exit 1
a=$work/ck.step00000002.safetensors b=$work/ck.step00000004.safetensors
[ -f "$a" ] && [ -f "$b" ] || { echo "FAIL: --keep 2 did not keep steps 2 and 4"; exit 1; }
"$bin" average --out "$work/avg.safetensors" --vocab "$work/ck.safetensors.vocab" "$a" "$b" || { echo "FAIL: average failed"; exit 1; }
fail=0
# The mean, tensor by tensor, read back with the Python standard library.
python3 - "$a" "$b" "$work/avg.safetensors" <<'PY' || fail=1
import json, struct, sys
def load(path):
    data = open(path, 'rb').read()
    n = struct.unpack('<Q', data[:8])[0]
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    out = {}
    for name, t in header.items():
        if name == '__metadata__' or t['dtype'] != 'F32': continue
        lo, hi = t['data_offsets']
        out[name] = struct.unpack('<%df' % ((hi - lo) // 4), body[lo:hi])
    return out, header.get('__metadata__', {})
x, _ = load(sys.argv[1]); y, _ = load(sys.argv[2]); m, meta = load(sys.argv[3])
params = [k for k in x if not k.startswith('adam.')]
assert params, 'no parameters'
for k in params:
    want = [struct.unpack('<f', struct.pack('<f', (p + q) / 2))[0] for p, q in zip(x[k], y[k])]
    assert list(m[k]) == want, k
assert any(x[k] != y[k] for k in params), 'the two checkpoints are equal'
assert meta.get('tfm.averaged') == '2', meta
print('ok: %d parameters are the mean of the two checkpoints' % len(params))
PY
"$bin" generate --load "$work/avg.safetensors" --length 3 > /dev/null ||
  { echo "FAIL: the average does not load"; fail=1; }
"$other" "$work/other.safetensors" || exit 1
out=$("$bin" average --out "$work/bad.safetensors" "$a" "$work/other.safetensors" 2>&1)
status=$?
if [ "$status" -eq 1 ] && printf '%s' "$out" | grep -q "other.safetensors" && [ ! -e "$work/bad.safetensors" ]; then
  echo "ok: refused: $out"
else
  echo "FAIL: mismatched checkpoint: status $status: $out"; fail=1
fi
exit $fail
