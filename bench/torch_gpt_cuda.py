# The GPU peer of tests/gpu/run.sh: one training step (forward, backward,
# AdamW) of gpt-small (models/gpt.tfm's defaults: pre-LN, tanh-GELU, learned
# positions, tied embeddings) in PyTorch eager mode on the GPU, f32 data with
# tf32 matrix products, as tfm's --target cuda dots are.
# Usage: python3 bench/torch_gpt_cuda.py   prints "median step MS ms"
import math, sys, time
import torch, torch.nn as nn, torch.nn.functional as F

if not torch.cuda.is_available():
    sys.exit("no CUDA device for PyTorch")
torch.backends.cuda.matmul.allow_tf32 = True
dev = "cuda"
L, C, H, V, T, B = 4, 256, 4, 1024, 128, 16


class Block(nn.Module):
    def __init__(s):
        super().__init__()
        s.ln1, s.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
        s.qkv, s.proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        s.fc, s.fc2 = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)
        s.register_buffer("mask", torch.full((T, T), float("-inf")).triu(1))

    def forward(s, x):
        q, k, v = s.qkv(s.ln1(x)).split(C, dim=2)
        q, k, v = [t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v)]
        a = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(C // H) + s.mask, dim=-1) @ v
        x = x + s.proj(a.transpose(1, 2).reshape(B, T, C))
        return x + s.fc2(F.gelu(s.fc(s.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(s):
        super().__init__()
        s.wte, s.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
        s.blocks = nn.ModuleList([Block() for _ in range(L)])
        s.lnf = nn.LayerNorm(C)

    def forward(s, idx, tgt):
        x = s.wte(idx) + s.wpe(torch.arange(T, device=dev))
        for b in s.blocks:
            x = b(x)
        return F.cross_entropy((s.lnf(x) @ s.wte.weight.T).view(-1, V), tgt.view(-1))


m = GPT().to(dev)
opt = torch.optim.AdamW(m.parameters(), lr=3e-4, weight_decay=0.0)
g = torch.Generator().manual_seed(0)
x = torch.randint(0, V, (B, T), generator=g).to(dev)
y = torch.randint(0, V, (B, T), generator=g).to(dev)


def step():  # loss.item() waits for the step, as tfm's step returns its loss
    opt.zero_grad(set_to_none=True)
    loss = m(x, y)
    loss.backward()
    opt.step()
    return loss.item()


for _ in range(5):
    step()
ts = []
for _ in range(50):
    t = time.perf_counter()
    step()
    ts.append(time.perf_counter() - t)
ts.sort()
print(f"median step {ts[len(ts) // 2] * 1000:.2f} ms")
