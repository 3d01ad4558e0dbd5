#!/usr/bin/env python3
"""`tfmc emit dot` as a picture: boxes per layer instance, fused kernels in
colours, and the SVG that Graphviz renders from it.

    check_graph_picture.py TFMC WORK_DIR

On models/gpt.tfm with two layers:
- --layers: a box (DOT cluster) per layer instance, nested as the paths are
  (block.0.attn inside block.0), each parameter in the box of its layer; in
  the training graph a layer's box also holds its backward and update nodes.
- --fused: every node a kernel computes is labelled with that kernel, and
  the kernels are those `emit kernels` lists (same count).
- --svg: Graphviz writes an SVG (well-formed XML with the boxes' titles),
  which headless Chromium shows, not blank, offline.
- bad use: --svg without emit dot (exit 2), an SVG path that cannot be
  written or no Graphviz on PATH (exit 1, a clear message).

Exit 0 pass, 1 fail, 77 when Graphviz's dot is not installed."""
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import chromium  # noqa: E402

failures = []
MODEL = [ROOT + "/models/gpt.tfm", "-D", "layers=2", "-D", "d_model=32", "-D", "heads=2",
         "-D", "d_ff=64", "-D", "seq_len=16", "-D", "batch=2"]


def check(ok, what):
    if not ok:
        failures.append(what)
    return ok


def run(*args, env=None):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True,
                          env=dict(os.environ, **(env or {})))


def emit(tfmc, *options):
    p = run(tfmc, "emit", "dot", *MODEL, *options)
    if p.returncode != 0:
        raise SystemExit("FAIL: emit dot %s exited %d: %s" % (" ".join(options), p.returncode,
                                                              p.stderr))
    return p.stdout


def boxes(dot):
    """{box label: (parent label or None, [node ids])} from the DOT text."""
    result, stack = {}, []
    for line in dot.splitlines():
        s = line.strip()
        if s.startswith("subgraph cluster_"):
            stack.append(None)
        elif s.startswith("label=") and stack and stack[-1] is None:
            label = re.match(r'label="([^"]*)"', s).group(1)
            parent = stack[-2] if len(stack) > 1 else None
            stack[-1] = label
            result[label] = (parent, [])
        elif s == "}" and stack:
            stack.pop()
        elif stack and re.match(r"n\d+ \[", s):
            result[stack[-1]][1].append(int(s[1:s.index(" ")]))
    return result


def labels(dot):
    return {int(m.group(1)): m.group(2) for m in re.finditer(r'^\s*n(\d+) \[label="(.*?)"', dot, re.M)}


def layers(tfmc):
    dot = emit(tfmc, "--layers")
    b = boxes(dot)
    for name in ("block", "block.0", "block.0.attn", "block.0.ff", "block.1.ln1", "ln_f", "wte"):
        check(name in b, "--layers: no box %r (boxes: %s)" % (name, sorted(b)))
    check(b.get("block.0.attn", (None,))[0] == "block.0", "block.0.attn is not inside block.0")
    check(b.get("block.0", (None,))[0] == "block", "block.0 is not inside block")
    lab = labels(dot)
    for box, (_, ids) in b.items():
        for i in ids:
            m = re.match(r'%\d+ = param \\"([^"\\]*)\\"', lab[i])
            if m:
                check(m.group(1).rsplit(".", 1)[0] == box,
                      "param %s is in box %s" % (m.group(1), box))
    params_in_attn = [i for i in b.get("block.0.attn", (None, []))[1] if " = param " in lab[i]]
    check(len(params_in_attn) >= 2, "block.0.attn holds params %r" % params_in_attn)
    forward = len(b.get("block.1.attn", (None, []))[1])
    train = boxes(emit(tfmc, "--layers", "--train"))
    trained = len(train.get("block.1.attn", (None, []))[1])
    check(trained > 2 * forward,
          "the training graph's block.1.attn box has %d nodes, the forward's %d: its backward "
          "and updates should be there too" % (trained, forward))


def fused(tfmc):
    dot = emit(tfmc, "--fused", "--train")
    kernels = {int(k) for k in re.findall(r"\\nkernel (\d+)\"", dot)}
    listing = run(tfmc, "emit", "kernels", "--train", *MODEL).stdout
    listed = len(re.findall(r"^kernel \d+", listing, re.M))
    check(listed > 0 and kernels == set(range(listed)),
          "--fused labels kernels %s; emit kernels lists %d" % (sorted(kernels)[:5], listed))
    roots = len(re.findall(r"penwidth=2.5", dot))
    check(roots >= listed, "%d stored nodes drawn thick for %d kernels" % (roots, listed))


def svg(tfmc, work):
    out = os.path.join(work, "gpt.svg")
    if os.path.exists(out):
        os.remove(out)
    p = run(tfmc, "emit", "dot", *MODEL, "--layers", "--fused", "--svg", out)
    check(p.returncode == 0 and p.stdout == "", "--svg exited %d: %s" % (p.returncode, p.stderr))
    if not check(os.path.exists(out), "--svg wrote no file"):
        return
    tree = ET.parse(out)
    titles = [t.text for t in tree.iter("{http://www.w3.org/2000/svg}title")]
    texts = " ".join(t.text or "" for t in tree.iter("{http://www.w3.org/2000/svg}text"))
    check(any(t and t.startswith("cluster_") for t in titles), "the SVG has no boxes")
    check("block.0.attn" in texts and "kernel 0" in texts, "the SVG does not name the boxes and kernels")
    if chromium.find_chromium():
        html = os.path.join(work, "gpt-graph.html")
        with open(html, "w") as f:
            f.write("<!doctype html><body style='margin:0;background:#fff'><img src='gpt.svg' style='width:100%'>")
        with chromium.Page(html, 1200, 900) as page:
            check(chromium.not_blank(page.screenshot(os.path.join(work, "gpt-graph.png"))),
                  "Chromium shows the SVG blank")
            check(not page.requests_outside(), "the SVG asked for the network")
    else:
        print("Chromium not installed: the SVG was not looked at")


def refusals(tfmc, work):
    p = run(tfmc, "emit", "graph", *MODEL, "--svg", work + "/x.svg")
    check(p.returncode == 2 and "--layers, --fused and --svg go with emit dot" in p.stderr,
          "--svg with emit graph: %d %s" % (p.returncode, p.stderr))
    p = run(tfmc, "emit", "dot", *MODEL, "--svg", "/nonexistent/dir/g.svg")
    check(p.returncode == 1 and "Graphviz's dot did not write /nonexistent/dir/g.svg" in p.stderr,
          "an unwritable SVG: %d %s" % (p.returncode, p.stderr))
    p = run(tfmc, "emit", "dot", *MODEL, "--svg", work + "/y.svg", env={"PATH": "/nonexistent"})
    check(p.returncode == 1 and "needs Graphviz's 'dot' program" in p.stderr,
          "no Graphviz: %d %s" % (p.returncode, p.stderr))


def main():
    tfmc, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    layers(tfmc)
    fused(tfmc)
    skipped = not shutil.which("dot")
    if skipped:
        print("Graphviz's dot is not installed: the SVG checks are skipped")
    else:
        svg(tfmc, work)
        refusals(tfmc, work)
    for f in failures:
        print("FAIL:", f)
    print("graph picture: %d problem(s)" % len(failures))
    return 1 if failures else 77 if skipped else 0


if __name__ == "__main__":
    sys.exit(main())
