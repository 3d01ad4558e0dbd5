"""The peer of bench/gemm_bf16_bench.c: torch.matmul on bf16 tensors (oneDNN,
AMX where the CPU has it) at the same cases, 2 threads, the median of ROUNDS
timed runs of about 50 ms each. Prints one tab-separated line a case, as
gemm_bf16_bench does, after a line naming the versions and the ISA oneDNN uses.
usage: python peer_matmul_bf16.py [ROUNDS [FILTER]]"""
import sys
import time

import torch

CASES = [  # name, ta, tb, m, n, k (as gemm_bf16_bench.c)
    ("square 512", False, False, 512, 512, 512),
    ("square 1024", False, False, 1024, 1024, 1024),
    ("square 2048", False, False, 2048, 2048, 2048),
    ("gpt nn [2048x256]x[256x768]", False, False, 2048, 768, 256),
    ("gpt nn [2048x256]x[256x1024]", False, False, 2048, 1024, 256),
    ("gpt nn [2048x1024]x[1024x256]", False, False, 2048, 256, 1024),
    ("gpt nt [2048x768]x[256x768]^T", False, True, 2048, 256, 768),
    ("gpt nt [2048x256]x[1024x256]^T", False, True, 2048, 1024, 256),
    ("gpt tn [2048x256]^Tx[2048x768]", True, False, 256, 768, 2048),
    ("gpt tn [2048x1024]^Tx[2048x256]", True, False, 1024, 256, 2048),
]


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    wanted = sys.argv[2] if len(sys.argv) > 2 else ""
    torch.set_num_threads(2)
    isa = torch.backends.cpu.get_cpu_capability()
    print(f"# torch {torch.__version__}, oneDNN {torch.backends.mkldnn.is_available()}, cpu capability {isa}",
          file=sys.stderr)
    for name, ta, tb, m, n, k in CASES:
        if wanted not in name:
            continue
        a = torch.rand(k, m) if ta else torch.rand(m, k)
        b = torch.rand(n, k) if tb else torch.rand(k, n)
        a, b = (a + 0.5).bfloat16(), (b + 0.5).bfloat16()
        x, y = (a.t() if ta else a), (b.t() if tb else b)
        c = torch.matmul(x, y)
        start = time.perf_counter()
        torch.matmul(x, y, out=c)
        once = time.perf_counter() - start
        reps = 1 if once > 0.05 else int(0.05 / once) + 1
        times = []
        for _ in range(rounds):
            start = time.perf_counter()
            for _ in range(reps):
                torch.matmul(x, y, out=c)
            times.append((time.perf_counter() - start) / reps)
        times.sort()
        median = times[(rounds - 1) // 2]
        exact = torch.matmul(x.double(), y.double())
        bound = torch.matmul(x.double().abs(), y.double().abs())
        error = ((c.double() - exact).abs() / bound).max().item()
        print(f"{name}\tonednn\t{median:.6f}\t{2 * m * n * k / median * 1e-9:.1f}\t{error:.1e}", flush=True)


main()
