# Peer for bench/decode_timing.sh: Hugging Face transformers' greedy
# `generate` (use_cache=True) of a GPT-2 of the same size as tfm's gpt there
# (4 layers, width 256, 4 heads, d_ff 1024, vocab 1024, context 1024, tied
# embeddings), random weights, PyTorch 2.x on the CPU.
# The time per new token is taken as tfm's `generate --timing` takes it:
# after the prompt, i.e. from the first generated token to the last (a
# logits processor stamps each step), divided by the steps between; the
# best of RUNS runs.
# usage: python hf_decode.py PREFIX TOKENS RUNS [THREADS]
# prints "hf params N" and "prefix P: X ms per new token".
import sys
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel, LogitsProcessor, LogitsProcessorList

prefix, tokens, runs = (int(a) for a in sys.argv[1:4])
threads = int(sys.argv[4]) if len(sys.argv) > 4 else 2
torch.set_num_threads(threads)
torch.manual_seed(0)
L, C, H, V, T = 4, 256, 4, 1024, 1024
cfg = GPT2Config(vocab_size=V, n_positions=T, n_embd=C, n_layer=L, n_head=H, n_inner=4 * C,
                 activation_function="gelu_new", resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                 tie_word_embeddings=True, bos_token_id=0, eos_token_id=None, pad_token_id=0)
model = GPT2LMHeadModel(cfg).eval()
# Tied: the output projection is wte, counted once.
print(f"hf params {sum(p.numel() for p in model.parameters())}", flush=True)


class Stamp(LogitsProcessor):
    def __init__(self):
        self.times = []

    def __call__(self, input_ids, scores):
        self.times.append(time.perf_counter())
        return scores


ids = torch.randint(0, V, (1, prefix))
best = None
with torch.inference_mode():
    for _ in range(runs):
        stamp = Stamp()
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=tokens,
                             min_new_tokens=tokens, do_sample=False, num_beams=1, use_cache=True,
                             logits_processor=LogitsProcessorList([stamp]))
        assert out.shape[1] == prefix + tokens, out.shape
        ms = 1e3 * (stamp.times[-1] - stamp.times[0]) / (len(stamp.times) - 1)
        best = ms if best is None else min(best, ms)
print(f"prefix {prefix}: {best:.3f} ms per new token")
