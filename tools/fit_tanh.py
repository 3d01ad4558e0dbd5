#!/usr/bin/python3
"""Derives the coefficients of the CPU's tanh (compiler/codegen/llvm/math.c).

tanh(x) / x is fitted as P(z) / Q(z), z = x^2, degrees 4 and 4, on
0 <= x <= 9 (tanh rounds to +-1 in f32 from 9.01): least squares
linearised as P(z) - f Q(z) with Q from the previous round (Loeb), weighted
towards the largest relative errors (Lawson) until the error levels off.
Prints the coefficients rounded to f32, the fit's relative error, and the
f32 evaluation's (Horner with fused multiply-adds, one division, as the
generated code does) largest error in ulp of tanh over every 7th float in
(0, 12]. Needs numpy (Debian: python3-numpy).
"""
import numpy as np

CLAMP, DEG_P, DEG_Q = 9.0, 4, 4

def fit():
    n = 4000
    x = np.concatenate([CLAMP * (np.cos(np.pi * (np.arange(n) + 0.5) / n) + 1) / 2,
                        np.linspace(1e-6, CLAMP, n)])
    f = np.tanh(x) / x
    u = x * x / CLAMP**2  # z scaled into [0, 1] for conditioning
    powers = [u**k for k in range(max(DEG_P, DEG_Q) + 1)]
    q, w = np.zeros(DEG_Q), np.ones_like(u)
    for _ in range(200):
        prev_q = 1 + sum(q[k] * powers[k + 1] for k in range(DEG_Q))
        a = np.column_stack(powers[:DEG_P + 1] + [-f * powers[k + 1] for k in range(DEG_Q)])
        weight = w / (f * prev_q)
        sol = np.linalg.lstsq(a * weight[:, None], f * weight, rcond=None)[0]
        p, q = sol[:DEG_P + 1], sol[DEG_P + 1:]
        err = (sum(p[k] * powers[k] for k in range(DEG_P + 1)) /
               (1 + sum(q[k] * powers[k + 1] for k in range(DEG_Q))) - f) / f
        w = w * np.sqrt(np.abs(err) + 1e-30)
        w /= w.max()
    pz = [p[k] / CLAMP**(2 * k) for k in range(DEG_P + 1)]
    qz = [1.0] + [q[k] / CLAMP**(2 * k + 2) for k in range(DEG_Q)]
    return pz, qz, np.abs(err).max()

def f32_tanh(x, p, q):
    f32 = np.float32
    def horner(z, c):
        y = np.full_like(z, c[-1])
        for k in range(len(c) - 2, -1, -1):  # a fused multiply-add: one rounding
            y = (y.astype(np.float64) * z + np.float64(c[k])).astype(f32)
        return y
    xc = np.clip(x, f32(-CLAMP), f32(CLAMP))
    z = (xc * xc).astype(f32)
    return np.clip((xc * horner(z, p)).astype(f32) / horner(z, q), f32(-1), f32(1))

p, q, rel = fit()
p32, q32 = [np.float32(c) for c in p], [np.float32(c) for c in q]
fmt = lambda cs: ", ".join(np.format_float_scientific(c, unique=True) for c in cs)
print("p:", fmt(p32))
print("q:", fmt(q32))
x = np.arange(np.float32(1e-30).view(np.int32), np.float32(12).view(np.int32), 7,
              dtype=np.int32).view(np.float32)
ref = np.tanh(x.astype(np.float64))
ulps = np.abs(f32_tanh(x, p32, q32) - ref) / np.spacing(ref.astype(np.float32))
print(f"fit relative error {rel:.2g}; f32 evaluation within {ulps.max():.1f} ulp")
