"""The MKL peer of bench/gemm_bench: f32 products through torch.matmul
(PyTorch 2.x from PyPI computes them with MKL's sgemm), run by gemm_bench
as a child process so that its runs alternate with ours case by case.

gemm_bench sets GEMM_BENCH_PYTHON to a Python that has torch and runs this
script with the number of threads (1 or 2; with 1 a run is timed by the
thread's CPU time, as gemm_bench times its own). The script reads one
command a line on stdin and answers one line on stdout:
  case DIR TA TB BATCH M N K A_BATCHED B_BATCHED -> "ready" (operands read, one warm-up run)
  time REPS                                      -> seconds per run (mean of REPS runs)
  check                                          -> "written" (the result in DIR/c.bin)
The operands are gemm_bench's own, read from DIR/a.bin and DIR/b.bin (raw
f32, row-major as the case stores them), and the result goes back the same
way so that gemm_bench checks that the peer computed the same product.
"""
import sys
import time

import numpy
import torch


def operands(folder, ta, tb, batch, m, n, k, a_batched, b_batched):
    a = torch.from_numpy(numpy.fromfile(folder + "/a.bin", dtype=numpy.float32))
    b = torch.from_numpy(numpy.fromfile(folder + "/b.bin", dtype=numpy.float32))
    a = a.view(*([batch] if a_batched else []), *((k, m) if ta else (m, k)))
    b = b.view(*([batch] if b_batched else []), *((n, k) if tb else (k, n)))
    # A transposed operand is a transposed view, as a weight gradient x^T g
    # is written: MKL gets it as a transpose flag, not a copy.
    return (a.transpose(-1, -2) if ta else a), (b.transpose(-1, -2) if tb else b)


def main():
    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    torch.set_num_threads(threads)
    clock = time.thread_time if threads == 1 else time.perf_counter
    shown = [line.strip(" -") for line in torch.__config__.show().splitlines()
             if "Math Kernel Library" in line or "MKL-DNN" in line or "oneDNN" in line]
    print("MKL peer: torch %s, %d threads; %s" % (torch.__version__, torch.get_num_threads(),
                                                 "; ".join(shown)), file=sys.stderr, flush=True)
    a = b = c = folder = None
    for line in sys.stdin:
        word = line.split()
        if not word:
            continue
        if word[0] == "case":
            folder = word[1]
            ta, tb, batch, m, n, k, a_batched, b_batched = (int(x) for x in word[2:10])
            a, b = operands(folder, ta, tb, batch, m, n, k, a_batched, b_batched)
            c = torch.matmul(a, b)
            torch.matmul(a, b, out=c)
            print("ready", flush=True)
        elif word[0] == "time":
            reps = int(word[1])
            t0 = clock()
            for _ in range(reps):
                torch.matmul(a, b, out=c)
            print("%.9e" % ((clock() - t0) / reps), flush=True)
        elif word[0] == "check":
            c.contiguous().numpy().tofile(folder + "/c.bin")
            print("written", flush=True)
        else:
            print("error: unknown command " + word[0], flush=True)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
