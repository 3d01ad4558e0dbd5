#!/usr/bin/env python3
"""Compares two training runs: the losses of their metrics files (JSON
lines, loss per step) and the tensors of their checkpoints (safetensors, F32
read with the standard library alone). Prints the largest relative loss
difference and the largest absolute and relative parameter differences;
exits 1 when either exceeds --tol.

usage: dp_compare.py [--tol 1e-6] [--skip SUFFIX]... A.jsonl B.jsonl A.safetensors B.safetensors

--skip leaves out params whose name ends with SUFFIX from the check (still
printed): a gradient that is zero in exact arithmetic, as an attention's key
bias (softmax ignores a constant added to every score), is rounding noise,
which Adam's normalisation turns into steps of about lr either way.
"""
import json
import struct
import sys


def losses(path):
    out = {}
    with open(path) as f:
        for line in f:
            rec = json.loads(line)
            if "step" in rec and rec.get("loss") is not None:
                out[rec["step"]] = rec["loss"]
    return out


def tensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__" or info["dtype"] != "F32":
            continue
        a, b = info["data_offsets"]
        out[name] = struct.unpack("<%df" % ((b - a) // 4), data[a:b])
    return out, header.get("__metadata__", {})


def main(argv):
    tol, skip = 1e-6, []
    while argv[:1] in (["--tol"], ["--skip"]):
        if argv[0] == "--tol":
            tol = float(argv[1])
        else:
            skip.append(argv[1])
        argv = argv[2:]
    la, lb, ca, cb = argv
    a, b = losses(la), losses(lb)
    steps = sorted(set(a) & set(b))
    loss_rel = max((abs(a[s] - b[s]) / max(abs(b[s]), 1e-30) for s in steps), default=0.0)
    ta, ma = tensors(ca)
    tb, mb = tensors(cb)
    if set(ta) != set(tb):
        print("FAIL: the checkpoints hold different tensors")
        return 1
    abs_diff = rel_diff = skipped = 0.0
    for name in ta:
        if name.startswith(("adam.", "sgd.")):
            continue  # the optimizer's moments: compared through the params they move
        for x, y in zip(ta[name], tb[name]):
            d = abs(x - y)
            if name.endswith(tuple(skip)) and skip:
                skipped = max(skipped, d)
                continue
            abs_diff = max(abs_diff, d)
            rel_diff = max(rel_diff, d / max(abs(y), 1e-3))
    print("steps %d..%d: max relative loss difference %.3g; params: max abs difference %.3g, "
          "max relative (|p| floored at 1e-3) %.3g; world sizes %s and %s"
          % (steps[0] if steps else 0, steps[-1] if steps else 0, loss_rel, abs_diff, rel_diff,
             ma.get("tfm.world_size"), mb.get("tfm.world_size")))
    if skip:
        print("  left out (%s): max abs difference %.3g" % (", ".join(skip), skipped))
    return 0 if loss_rel <= tol and abs_diff <= tol else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
