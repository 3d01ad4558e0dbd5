# The GPT-2 124M peer of tests/gpu/run.sh: one training step (forward,
# backward, gradient clipping to norm 1, AdamW) of models/gpt2.tfm's model
# (pre-LN, LayerNorm eps 1e-5, tanh-GELU, biases on every projection,
# learned positions, tied embeddings; dropout 0, as run.sh builds tfm's) in
# PyTorch on the GPU under bf16 autocast, eager or torch.compile'd.
# Attention is F.scaled_dot_product_attention (causal): PyTorch's own flash
# kernel. The step waits for its loss (loss.item()), as tfm's step does.
# usage: python3 bench/torch_gpt2_cuda.py eager|compile [STEPS]
#   prints "MODE median step MS ms" over STEPS timed steps (default 20),
#   after 3 untimed ones (torch.compile compiles there)
import math, sys, time
import torch, torch.nn as nn, torch.nn.functional as F

mode = sys.argv[1] if len(sys.argv) > 1 else "eager"
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 20
if mode not in ("eager", "compile"):
    sys.exit("usage: torch_gpt2_cuda.py eager|compile [STEPS]")
if not torch.cuda.is_available():
    sys.exit("no CUDA device for PyTorch")
torch.backends.cuda.matmul.allow_tf32 = True
dev = "cuda"
L, C, H, V, T, B = 12, 768, 12, 50257, 1024, 8


class Block(nn.Module):
    def __init__(s):
        super().__init__()
        s.ln1, s.ln2 = nn.LayerNorm(C, eps=1e-5), nn.LayerNorm(C, eps=1e-5)
        s.qkv, s.proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        s.fc, s.fc2 = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(s, x):
        q, k, v = s.qkv(s.ln1(x)).split(C, dim=2)
        q, k, v = [t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v)]
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + s.proj(a.transpose(1, 2).reshape(B, T, C))
        return x + s.fc2(F.gelu(s.fc(s.ln2(x)), approximate="tanh"))


class GPT2(nn.Module):
    def __init__(s):
        super().__init__()
        s.wte, s.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
        s.blocks = nn.ModuleList([Block() for _ in range(L)])
        s.lnf = nn.LayerNorm(C, eps=1e-5)

    def forward(s, idx, tgt):
        x = s.wte(idx) + s.wpe(torch.arange(T, device=idx.device))
        for b in s.blocks:
            x = b(x)
        return F.cross_entropy((s.lnf(x) @ s.wte.weight.T).float().view(-1, V), tgt.view(-1))


m = GPT2().to(dev)
opt = torch.optim.AdamW(m.parameters(), lr=2.5e-4, betas=(0.9, 0.999), eps=1e-8,
                        weight_decay=0.01, fused=True)
model = torch.compile(m) if mode == "compile" else m
g = torch.Generator().manual_seed(0)
x = torch.randint(0, V, (B, T), generator=g).to(dev)
y = torch.randint(0, V, (B, T), generator=g).to(dev)


def step():
    opt.zero_grad(set_to_none=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(x, y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
    opt.step()
    return loss.item()


for _ in range(3):
    step()
ts = []
for _ in range(steps):
    t = time.perf_counter()
    step()
    ts.append(time.perf_counter() - t)
ts.sort()
print(f"{mode} median step {ts[len(ts) // 2] * 1000:.2f} ms")
