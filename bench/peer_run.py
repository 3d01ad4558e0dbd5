# Runs a peer benchmark script (../shared/bench/peers_gpt.py or torch_gpt.py)
# unchanged, adding what bench/gpt_step.sh needs to check that the peer
# trains the same model as tfm and which kernels it ran:
#   - "peer params N": the number of parameters the peer trains (PyTorch:
#     those given to its optimizer; JAX: the leaves of the first argument of
#     its jitted step), taken when the model is set up, outside the timing;
#   - with TFM_PEER_ONEDNN_STEP=1 and PyTorch, one extra step after the
#     timed ones under oneDNN's verbose mode (its "onednn_verbose,...,exec"
#     lines name each primitive's implementation, e.g. brg_matmul:avx512_core_amx).
# usage: python peer_run.py SCRIPT [ARGS...]
import os
import runpy
import sys

script = sys.argv[1]
sys.argv = sys.argv[1:]  # the peer sees its own argv: SCRIPT ARGS...
uses_jax = len(sys.argv) > 1 and sys.argv[1].startswith("jax")


def count(n):
    print(f"peer params {n}", flush=True)


if uses_jax:
    import jax

    jit = jax.jit

    def counting_jit(fn, *a, **kw):
        compiled = jit(fn, *a, **kw)
        if getattr(fn, "__name__", "") != "step":  # only the peer's own step
            return compiled
        seen = []

        def call(params, *rest, **kwr):
            if not seen:  # only the first call; later calls go straight on
                seen.append(True)
                count(sum(leaf.size for leaf in jax.tree_util.tree_leaves(params)))
            return compiled(params, *rest, **kwr)

        return call

    jax.jit = counting_jit
else:
    import torch

    adamw = torch.optim.AdamW

    class CountingAdamW(adamw):
        def __init__(self, params, *a, **kw):
            params = list(params)
            count(sum(p.numel() for p in params))
            super().__init__(params, *a, **kw)

    torch.optim.AdamW = CountingAdamW

peer = runpy.run_path(script, run_name="__main__")

if not uses_jax and os.environ.get("TFM_PEER_ONEDNN_STEP") == "1":
    import torch

    sys.stdout.flush()
    with torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON):
        peer["step"]()
    sys.stdout.flush()
