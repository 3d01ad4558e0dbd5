"""Reads the checkpoint ckpt_write_example writes, from Python.

usage: check_with_python.py stdlib|safetensors WRITER OUT.safetensors

stdlib:      parses the layout with json/struct and checks the CRC32s with zlib.
safetensors: loads it with the safetensors package (torch when importable);
             exits 77 (ctest: skipped) when neither is installed.
"""
import json
import struct
import subprocess
import sys
import zlib

SKIP = 77

EXPECTED = {
    "layer.0.w": ("F32", [2, 3], [i * 0.5 - 1.0 for i in range(6)]),
    "layer.0.b": ("F64", [3], [i / 3.0 for i in range(3)]),
    "tokens": ("I32", [4], [-2, -1, 0, 2147483647]),
    "emb": ("BF16", [2, 2], [1.0, 2.0, -1.0, 0.0]),
}
FORMATS = {"F32": "f", "F64": "d", "I32": "i"}


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def check_stdlib(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    if (8 + n) % 8:
        fail("data does not start 8-byte aligned")
    header = json.loads(data[8 : 8 + n].decode("utf-8"))
    meta = header.pop("__metadata__")
    body = data[8 + n :]
    if set(header) != set(EXPECTED):
        fail("tensors %s" % sorted(header))
    end = 0
    for name, info in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"]):
        dtype, shape, values = EXPECTED[name]
        begin, stop = info["data_offsets"]
        if info["dtype"] != dtype or info["shape"] != shape or begin != end:
            fail("%s: %s" % (name, info))
        raw = body[begin:stop]
        end = stop
        if dtype == "BF16":
            halves = [raw[i : i + 2] for i in range(0, len(raw), 2)]
            got = [struct.unpack("<f", b"\0\0" + h)[0] for h in halves]
        else:
            got = list(struct.unpack("<%d%s" % (len(values), FORMATS[dtype]), raw))
        if dtype == "F32":
            values = [struct.unpack("<f", struct.pack("<f", v))[0] for v in values]
        if got != values:
            fail("%s: values %s" % (name, got))
        if meta["tfm.crc32." + name] != "%08x" % zlib.crc32(raw):
            fail("%s: CRC32 %s, zlib says %08x" % (name, meta["tfm.crc32." + name], zlib.crc32(raw)))
    if end != len(body):
        fail("%d bytes after the last tensor" % (len(body) - end))
    plain = sorted((k, v) for k, v in meta.items() if not k.startswith("tfm.crc32."))
    blob = b"".join(k.encode() + b"\0" + v.encode() + b"\0" for k, v in plain)
    if meta["tfm.crc32.__metadata__"] != "%08x" % zlib.crc32(blob):
        fail("metadata CRC32")
    if meta["tfm.step"] != "42" or meta["tfm.seed"] != "1234" or meta["format"] != "pt":
        fail("metadata %s" % meta)


def check_safetensors(path):
    try:
        import torch
        from safetensors.torch import load_file
    except ImportError:
        torch = None
        try:
            from safetensors.numpy import load_file
        except ImportError:
            print("neither safetensors.torch nor safetensors.numpy is importable: skipped")
            sys.exit(SKIP)
    from safetensors import safe_open

    with safe_open(path, framework="pt" if torch else "numpy") as f:
        meta = f.metadata()
    if meta.get("tfm.step") != "42" or meta.get("tfm.seed") != "1234":
        fail("metadata %s" % meta)
    if torch is None:
        # numpy has no bfloat16: check the others through safe_open.
        with safe_open(path, framework="numpy") as f:
            for name, (dtype, shape, values) in EXPECTED.items():
                if dtype == "BF16":
                    continue
                t = f.get_tensor(name)
                got = [float(v) for v in t.flatten()]
                if list(t.shape) != shape or got != [float(v) for v in values]:
                    fail("%s: %s" % (name, t))
        return
    state = load_file(path)
    if set(state) != set(EXPECTED):
        fail("state dict keys %s" % sorted(state))
    dtypes = {"F32": torch.float32, "F64": torch.float64, "I32": torch.int32,
              "BF16": torch.bfloat16}
    for name, (dtype, shape, values) in EXPECTED.items():
        t = state[name]
        if t.dtype != dtypes[dtype] or list(t.shape) != shape:
            fail("%s: %s %s" % (name, t.dtype, list(t.shape)))
        if not torch.equal(t, torch.tensor(values, dtype=dtypes[dtype]).reshape(shape)):
            fail("%s: %s" % (name, t))


def main():
    mode, writer, path = sys.argv[1:4]
    subprocess.run([writer, path], check=True)
    if mode == "stdlib":
        check_stdlib(path)
    else:
        check_safetensors(path)
    print("ok: %s read %s" % (mode, path))


main()
