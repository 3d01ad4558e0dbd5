#!/usr/bin/env python3
"""Pages of real models in headless Chromium, offline.

    check_model_pages.py gpt TFMC WORK_DIR TEXT
    check_model_pages.py transformer TFMC WORK_DIR SEQ2SEQ_GEN
    check_model_pages.py curves TFMC WORK_DIR TEXT

gpt: a 2-layer gpt trained a few steps; `attention` writes its page, which
shows both layers' maps over the text, and a click on a query token or the
choice of another map or head changes the weights shown. Bad input (another
model's checkpoint, an output that does not exist or is not attention, a
text longer than the window) is refused with a clear message.

transformer: the seq2seq Transformer on its synthetic task; the page of a
source/target pair has the encoder's (source x source), the decoder's
(target x decoder input) and the cross-attention (target x source) maps.

curves: train --metrics through a crash and --resume, then tools/report.py
draws that run beside another seed's; a broken metrics line is refused.

Exit 0 pass, 1 fail, 77 when Chromium is not installed."""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import chromium  # noqa: E402

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
    return ok


def run(*args, env=None, ok=True):
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True,
                       env=dict(os.environ, **(env or {})))
    if ok and p.returncode != 0:
        raise SystemExit("FAIL: %s exited %d:\n%s%s" % (" ".join(map(str, args)), p.returncode,
                                                       p.stdout, p.stderr))
    return p


def refused(what, args, message):
    p = run(*args, ok=False)
    check(p.returncode == 1 and message in p.stderr,
          "%s: expected exit 1 and %r, got %d: %s" % (what, message, p.returncode, p.stderr))


def page_data(p):
    return p.eval("JSON.parse(document.getElementById('tfm-data').textContent)")


def shown_row(p):
    return p.eval("JSON.parse(document.getElementById('row').dataset.weights)")


def select(p, element, value):
    p.eval("(() => { const s = document.getElementById('%s'); s.value = '%s';"
           " s.dispatchEvent(new Event('change')); })()" % (element, value))


def open_page(path, png):
    """The page, checked not blank and offline; the caller closes it."""
    p = chromium.Page(path, 1000, 700)
    p.__enter__()
    check(chromium.not_blank(p.screenshot(png)), "%s: the screenshot is blank" % path)
    return p


def close_page(p, path):
    check(not p.requests_outside(), "%s: outside requests %r" % (path, p.requests_outside()))
    p.__exit__(None, None, None)


def gpt(tfmc, work, text):
    model, ckpt, html = work + "/gpt", work + "/gpt.ckpt", work + "/gpt.html"
    run(tfmc, "build", ROOT + "/models/gpt.tfm", "-D", "layers=2", "-D", "d_model=32", "-D",
        "heads=2", "-D", "d_ff=64", "-D", "seq_len=32", "-D", "batch=2", "-o", model)
    run(model, "train", "--data", text, "--steps", "10", "--save", ckpt, "--threads", "2")
    sentence = "Attention is all you need"
    out = run(model, "attention", "--load", ckpt, "--text", sentence, "--html", html,
              "--layer", "1", "--head", "1").stdout
    check("block.0.attn.weights block.1.attn.weights" in out, "attention printed %r" % out)
    p = open_page(html, work + "/gpt.png")
    data = page_data(p)
    check([m["name"] for m in data["maps"]] == ["block.0.attn.weights", "block.1.attn.weights"],
          "maps %r" % [m["name"] for m in data["maps"]])
    check(data["sequences"].get("text") == list(sentence), "tokens %r" % data["sequences"])
    check(p.eval("document.getElementById('map').value") == "1", "the page opens on layer 1")
    first = shown_row(p)
    check(len(first) == len(sentence) and abs(sum(first) - 1) < 1e-3,
          "the last query's row %r does not sum to 1 over %d keys" % (first, len(sentence)))
    # The model is causal: query 3 sees keys 0..3 only.
    p.click('#queries .tok[data-index="3"]')
    row = shown_row(p)
    check(row != first and all(w == 0 for w in row[4:]) and abs(sum(row) - 1) < 1e-3,
          "after clicking query 3 the row is %r" % row)
    select(p, "head", "0")
    check(shown_row(p) != row, "choosing head 0 did not change the weights")
    select(p, "map", "0")
    check(shown_row(p) != row, "choosing layer 0 did not change the weights")
    close_page(p, html)

    other = work + "/other.ckpt"
    run(tfmc, "build", ROOT + "/models/gpt.tfm", "-D", "layers=1", "-D", "d_model=32", "-D",
        "heads=2", "-D", "d_ff=64", "-D", "seq_len=32", "-D", "batch=2", "-o", work + "/gpt1")
    run(work + "/gpt1", "train", "--data", text, "--steps", "1", "--save", other, "--threads", "1")
    base = [model, "attention", "--load", ckpt, "--html", work + "/bad.html"]
    refused("another model's checkpoint",
            [model, "attention", "--load", other, "--vocab", ckpt + ".vocab", "--text", "ab",
             "--html", work + "/bad.html"], "missing tensor 'block.1.")
    refused("an output that does not exist", base + ["--text", "ab", "--output", "nope"],
            "has no output 'nope' (its outputs and probes: block.0.attn.weights")
    refused("an output that is not attention", base + ["--text", "ab", "--output", "logits"],
            "output 'logits' is not shaped like attention weights")
    refused("a text longer than the window", base + ["--text", "x" * 33],
            "--text has 33 bytes but model gpt reads at most 32")
    refused("a head that does not exist", base + ["--text", "ab", "--head", "2"],
            "--head 2: map block.0.attn.weights has heads 0 to 1")
    check(not os.path.exists(work + "/bad.html"), "a refused command wrote a page")


def transformer(tfmc, work, gen):
    model, ckpt, html = work + "/s2s", work + "/s2s.ckpt", work + "/s2s.html"
    run(gen, work, "--test", "20")
    run(tfmc, "build", ROOT + "/examples/seq2seq/transformer.tfm", "-D", "d_model=32", "-D",
        "heads=2", "-D", "d_ff=64", "-D", "batch=4", "-o", model)
    run(model, "train", "--data", work + "/train.tsv", "--steps", "20", "--save", ckpt,
        "--threads", "2")
    with open(work + "/test.tsv") as f:
        source, target = f.readline().rstrip("\n").split("\t")
    run(model, "attention", "--load", ckpt, "--text", source + "\t" + target, "--html", html,
        "--layer", "decoder.cross_attn.weights")
    p = open_page(html, work + "/s2s.png")
    data = page_data(p)
    seqs = data["sequences"]
    check(seqs.get("source") == source.split(), "source %r" % seqs.get("source"))
    check(seqs.get("target") == target.split() + ["<eos>"], "target %r" % seqs.get("target"))
    check(seqs.get("decoder input") == ["<bos>"] + target.split(),
          "decoder input %r" % seqs.get("decoder input"))
    axes = {m["name"]: (m["queries"], m["keys"]) for m in data["maps"]}
    check(axes == {"encoder.attn.weights": ("source", "source"),
                   "decoder.self_attn.weights": ("target", "decoder input"),
                   "decoder.cross_attn.weights": ("target", "source"),
                   "cross_attention": ("target", "source")}, "maps %r" % axes)
    first = shown_row(p)
    check(len(first) == len(source.split()) and abs(sum(first) - 1) < 1e-3,
          "cross-attention row %r" % first)
    p.click('#queries .tok[data-index="2"]')
    check(shown_row(p) != first, "clicking the third target word did not change the weights")
    close_page(p, html)
    # A source alone is translated greedily first.
    out = run(model, "attention", "--load", ckpt, "--text", source, "--html", html).stdout
    check(out.startswith("target: "), "greedy attention printed %r" % out)


def curves(tfmc, work, text):
    model = work + "/gpt"
    run(tfmc, "build", ROOT + "/models/gpt.tfm", "-D", "layers=1", "-D", "d_model=32", "-D",
        "heads=2", "-D", "d_ff=64", "-D", "seq_len=24", "-D", "batch=2", "-o", model)
    a, b = work + "/a.jsonl", work + "/b.jsonl"
    for f in (a, b, work + "/a.ckpt"):
        if os.path.exists(f):
            os.remove(f)
    train = [model, "train", "--data", text, "--steps", "20", "--log-every", "5", "--every",
             "10", "--threads", "2"]
    crashed = run(*train, "--save", work + "/a.ckpt", "--metrics", a,
                  env={"TFM_TEST_KILL_AT_STEP": "17"}, ok=False)
    check(crashed.returncode != 0, "the run meant to crash at step 17 finished")
    run(*train, "--save", work + "/a.ckpt", "--metrics", a, "--resume")
    run(*train, "--seed", "2", "--save", work + "/b.ckpt", "--metrics", b)
    lines = [json.loads(line) for line in open(a)]
    steps = [x["step"] for x in lines if x["kind"] == "step"]
    # The killed run's lines past its step-10 checkpoint are gone; the
    # resumed run logs its first step, as a fresh run does.
    check(steps == [1, 5, 10, 11, 15, 20], "the resumed run logged steps %r" % steps)
    check([x["resumed_at"] for x in lines if x["kind"] == "run"] == [0, 10],
          "run lines %r" % [x for x in lines if x["kind"] == "run"])
    check(all(isinstance(x.get("test_loss"), float) for x in lines if x["kind"] == "step"),
          "a step line lacks the held-out loss")
    html = work + "/curves.html"
    run(sys.executable, ROOT + "/tools/report.py", "seed1=" + a, "seed2=" + b, "-o", html)
    p = open_page(html, work + "/curves.png")
    names = p.eval("[...document.querySelectorAll('.runname')].map(e => e.textContent)")
    check("seed1" in " ".join(names) and "seed2" in " ".join(names), "legend %r" % names)
    lines_drawn = p.eval("document.querySelectorAll('#loss-step path, #loss-step polyline')"
                         ".length")
    check(lines_drawn >= 4, "the loss chart draws %r lines (2 runs x train/held-out)" % lines_drawn)
    close_page(p, html)
    broken = work + "/broken.jsonl"
    with open(broken, "w") as f:
        f.write(open(a).read() + '{"kind":"step","step":25,"loss":\n')
    p = run(sys.executable, ROOT + "/tools/report.py", broken, "-o", work + "/bad.html", ok=False)
    check(p.returncode == 1 and "broken.jsonl:%d: not JSON" % (len(lines) + 1) in p.stderr,
          "a broken line: %d %s" % (p.returncode, p.stderr))


def main():
    kind, tfmc, work, extra = sys.argv[1:5]
    if chromium.find_chromium() is None:
        print("skipped: chromium is not installed")
        return 77
    os.makedirs(work, exist_ok=True)
    {"gpt": gpt, "transformer": transformer, "curves": curves}[kind](tfmc, work, extra)
    for f in failures:
        print("FAIL:", f)
    print("%s pages: %s" % (kind, "ok" if not failures else "%d failures" % len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
