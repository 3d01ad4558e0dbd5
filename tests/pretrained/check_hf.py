#!/usr/bin/env python3
"""Hugging Face checkpoints into models/gpt2.tfm and models/bert.tfm.

    check_hf.py gpt2|bert|refusals TFMC ROOT WORK_DIR

A small randomly initialised GPT2LMHeadModel / BertModel from transformers
(its weights perturbed so that no LayerNorm is the identity) is saved as
safetensors; the model is built with the same small config; `forward
--init` runs it on the same inputs; logits, hidden states (and BERT's
pooled vector and mean-pooled embedding) must match transformers' to
1e-4 in f32. gpt2 also checks fine-tuning: `train --init` on a text whose
every window is the same batch starts from the loss `forward` gives for
that batch, which is the loss transformers gives.

refusals: a file lacking a tensor the block reads, one of another
width, and a BERT checkpoint given to GPT-2 are refused with exit 1 and
messages naming the tensors.

Exit 0 pass, 1 fail, 77 when torch or transformers is not installed."""
import json
import os
import subprocess
import sys

try:
    import numpy as np
    import torch
    import transformers
    from safetensors.numpy import load_file, save_file
except ImportError as e:
    print("skipped: %s (tools/test.sh installs Debian's python3-torch and transformers)" % e)
    sys.exit(77)

TOL = 1e-4
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
    return ok


def run(*args, ok=True):
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    if ok and p.returncode != 0:
        raise SystemExit("FAIL: %s exited %d:\n%s%s" % (" ".join(map(str, args)), p.returncode,
                                                       p.stdout, p.stderr))
    return p


def perturb(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=g))
    model.eval()
    return model


def compare(name, ours, theirs):
    err = float(np.max(np.abs(ours.astype(np.float64) - theirs.astype(np.float64))))
    print("%-10s max abs error %.3g (%s, largest value %.3g)" %
          (name, err, "x".join(map(str, theirs.shape)), float(np.max(np.abs(theirs)))))
    check(ours.shape == theirs.shape and err <= TOL, "%s: max abs error %.3g > %g" % (name, err, TOL))


GPT2 = dict(vocab=100, n_positions=32, d_model=64, heads=4, layers=2, seq_len=16, batch=2)


def build(tfmc, root, work, model, config, extra=()):
    binary = os.path.join(work, model)
    defines = [x for k, v in config.items() for x in ("-D", "%s=%s" % (k, v))]
    run(tfmc, "build", os.path.join(root, "models", model + ".tfm"), *defines, *extra, "-o", binary)
    return binary


def gpt2_checkpoint(path, c, seed=1):
    cfg = transformers.GPT2Config(vocab_size=c["vocab"], n_positions=c["n_positions"],
                                  n_embd=c["d_model"], n_layer=c["layers"], n_head=c["heads"])
    torch.manual_seed(seed)
    model = perturb(transformers.GPT2LMHeadModel(cfg), seed)
    model.save_pretrained(path, safe_serialization=True)
    return model, os.path.join(path, "model.safetensors")


def gpt2(tfmc, root, work):
    c = GPT2
    model, ckpt = gpt2_checkpoint(os.path.join(work, "hf_gpt2"), c)
    binary = build(tfmc, root, work, "gpt2", dict(c, p_drop=0))
    rng = np.random.default_rng(2)
    tokens = rng.integers(0, c["vocab"], (c["batch"], c["seq_len"]), dtype=np.int32)
    targets = rng.integers(0, c["vocab"], (c["batch"], c["seq_len"]), dtype=np.int32)
    inputs, out = os.path.join(work, "gpt2_in.safetensors"), os.path.join(work, "gpt2_out.safetensors")
    save_file({"tokens": tokens, "targets": targets}, inputs)
    run(binary, "forward", "--init", ckpt, "--inputs", inputs, "--out", out)
    ours = load_file(out)
    with torch.no_grad():
        t = torch.from_numpy(tokens.astype(np.int64))
        hf = model(t, output_hidden_states=True)
        logits = hf.logits.numpy()
        loss = torch.nn.functional.cross_entropy(hf.logits.reshape(-1, c["vocab"]),
                                                 torch.from_numpy(targets.astype(np.int64)).reshape(-1))
    compare("logits", ours["logits"], logits)
    compare("hidden", ours["hidden"], hf.hidden_states[-1].numpy())
    compare("loss", ours["loss"].reshape(()), np.float32(loss.item()))

    # Fine-tuning from it: a text of one repeated byte makes every window of
    # every step the same batch (its byte is id 4, after the 4 specials).
    text = os.path.join(work, "same.txt")
    with open(text, "w") as f:
        f.write("a" * 4000)
    same = np.full((c["batch"], c["seq_len"]), 4, dtype=np.int32)
    save_file({"tokens": same, "targets": same}, inputs)
    run(binary, "forward", "--init", ckpt, "--inputs", inputs, "--out", out)
    expected = float(load_file(out)["loss"].reshape(()))
    with torch.no_grad():
        logits = model(torch.from_numpy(same.astype(np.int64))).logits
        hf_loss = float(torch.nn.functional.cross_entropy(logits.reshape(-1, c["vocab"]),
                                                          torch.full((same.size,), 4)))
    metrics = os.path.join(work, "finetune.jsonl")
    p = run(binary, "train", "--init", ckpt, "--data", text, "--steps", "3", "--log-every", "1",
            "--threads", "1", "--metrics", metrics)
    print(p.stdout.strip())
    with open(metrics) as f:
        steps = [json.loads(l) for l in f if '"step"' in l]
    step1 = next((s["loss"] for s in steps if s.get("step") == 1), float("nan"))
    check("initialised from %s (pretrained hf): 28 tensors into 36 parameters" % ckpt in p.stdout,
          "train --init did not say what it loaded: %r" % p.stdout[:300])
    check(abs(step1 - expected) < 1e-4 and abs(expected - hf_loss) < 1e-4,
          "train --init step 1 loss %.6f, forward's %.6f, transformers' %.6f" % (step1, expected, hf_loss))
    print("fine-tuning: step 1 loss %.4f, forward --init %.6f, transformers %.6f" % (step1, expected, hf_loss))


BERT = dict(vocab=100, max_positions=32, d_model=64, heads=4, layers=2, seq_len=16, batch=2)


def bert(tfmc, root, work):
    c = BERT
    cfg = transformers.BertConfig(vocab_size=c["vocab"], hidden_size=c["d_model"],
                                  num_hidden_layers=c["layers"], num_attention_heads=c["heads"],
                                  intermediate_size=4 * c["d_model"],
                                  max_position_embeddings=c["max_positions"])
    torch.manual_seed(3)
    model = perturb(transformers.BertModel(cfg), 3)
    model.save_pretrained(os.path.join(work, "hf_bert"), safe_serialization=True)
    ckpt = os.path.join(work, "hf_bert", "model.safetensors")
    binary = build(tfmc, root, work, "bert", dict(c, p_drop=0))
    rng = np.random.default_rng(4)
    tokens = rng.integers(1, c["vocab"], (c["batch"], c["seq_len"]), dtype=np.int32)
    tokens[1, 11:] = 0  # the second sequence is padded
    segments = (np.arange(c["seq_len"]) >= 6).astype(np.int32)[None, :].repeat(c["batch"], 0)
    labels = np.zeros(c["batch"], dtype=np.int32)
    inputs, out = os.path.join(work, "bert_in.safetensors"), os.path.join(work, "bert_out.safetensors")
    save_file({"tokens": tokens, "segments": segments, "labels": labels}, inputs)
    p = run(binary, "forward", "--init", ckpt, "--inputs", inputs, "--out", out)
    check("kept their initial values: classifier.w, classifier.b" in p.stderr,
          "the classifier, which BertModel has not, should keep its values: %r" % p.stderr)
    ours = load_file(out)
    with torch.no_grad():
        hf = model(torch.from_numpy(tokens.astype(np.int64)),
                   attention_mask=torch.from_numpy((tokens != 0).astype(np.int64)),
                   token_type_ids=torch.from_numpy(segments.astype(np.int64)))
    hidden = hf.last_hidden_state.numpy()
    keep = (tokens != 0).astype(np.float32)[:, :, None]
    compare("hidden", ours["hidden"], hidden)
    compare("pooled", ours["pooled"], hf.pooler_output.numpy())
    compare("embedding", ours["embedding"], (hidden * keep).sum(1) / keep.sum(1))

    # embed: lines of different lengths through a WordPiece vocab.txt, three
    # lines in batches of two (the last batch half padding), each wrapped in
    # [CLS] ... [SEP] and padded with [PAD] = 0, against transformers given
    # the same ids and their attention mask.
    words = ["w%d" % i for i in range(c["vocab"] - 5)]
    vocab = os.path.join(work, "vocab.txt")
    with open(vocab, "w") as f:
        f.write("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words) + "\n")
    lines = ["w1 w2 w3", "w10 w20 w30 w40 w50 w60 w70 w80", "w5"]
    data = os.path.join(work, "lines.txt")
    with open(data, "w") as f:
        f.write("\n".join(lines) + "\n")
    out = os.path.join(work, "embed.safetensors")
    run(binary, "embed", "--init", ckpt, "--tokenizer", vocab, "--data", data, "--out", out)
    vectors = load_file(out)["embedding"]
    expected = []
    for text in lines:
        ids = [2] + [5 + int(w[1:]) for w in text.split()] + [3]
        t = torch.tensor([ids])
        with torch.no_grad():
            h = model(t, attention_mask=torch.ones_like(t), token_type_ids=torch.zeros_like(t))
        expected.append(h.last_hidden_state[0].mean(0).numpy())
    compare("embed", vectors, np.stack(expected))


def refusals(tfmc, root, work):
    c = GPT2
    binary = build(tfmc, root, work, "gpt2", c)
    _, ckpt = gpt2_checkpoint(os.path.join(work, "hf_ok"), c)
    tensors = load_file(ckpt)
    text = os.path.join(work, "text.txt")
    with open(text, "w") as f:
        f.write("the quick brown fox jumps over the lazy dog\n" * 40)

    def refused(what, path, *messages):
        p = run(binary, "train", "--init", path, "--data", text, "--steps", "1", ok=False)
        check(p.returncode == 1 and all(m in p.stderr for m in messages),
              "%s: exit %d, expected 1 and %r: %s" % (what, p.returncode, messages, p.stderr))

    missing = dict(tensors)
    del missing["transformer.h.1.mlp.c_fc.bias"]
    save_file(missing, os.path.join(work, "missing.safetensors"))
    refused("a missing tensor", os.path.join(work, "missing.safetensors"),
            "missing, read by the block (1): transformer.h.1.mlp.c_fc.bias")
    _, wide = gpt2_checkpoint(os.path.join(work, "hf_wide"), dict(c, d_model=32))
    refused("another width", wide, "transformer.wte.weight is [100, 32] in the file, the block "
            "reads [100, 64]")
    bert_ckpt = os.path.join(work, "hf_bert_other")
    cfg = transformers.BertConfig(vocab_size=100, hidden_size=64, num_hidden_layers=2,
                                  num_attention_heads=4, intermediate_size=256,
                                  max_position_embeddings=32)
    transformers.BertModel(cfg).save_pretrained(bert_ckpt, safe_serialization=True)
    refused("another architecture", os.path.join(bert_ckpt, "model.safetensors"),
            "missing, read by the block (", "transformer.wte.weight",
            "in the file but neither read nor left out", "embeddings.word_embeddings.weight")
    p = run(binary, "train", "--init", ckpt, "--pretrained", "other", "--data", text, ok=False)
    check(p.returncode == 1 and "has no pretrained block 'other' (it has: hf)" in p.stderr,
          "an unknown block: %s" % p.stderr)
    print("refusals: %d checked" % 4)


def main():
    kind, tfmc, root, work = sys.argv[1:5]
    os.makedirs(work, exist_ok=True)
    print("torch %s, transformers %s" % (torch.__version__, transformers.__version__))
    {"gpt2": gpt2, "bert": bert, "refusals": refusals}[kind](tfmc, root, work)
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
