#!/usr/bin/env python3
"""The toy attention page (toy_attention.c) in headless Chromium, offline:
not blank, no outside request, the first query's weights shown as
18.0/12.0/40.0/10.0/20.0 % with output 30.2, and a real click on the second
query token changing them to the second row and 31.6.

    check_toy_attention.py TOY_ATTENTION_BINARY WORK_DIR
Exit 0 pass, 1 fail, 77 when Chromium is not installed."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chromium  # noqa: E402


def main():
    binary, work = sys.argv[1], sys.argv[2]
    if chromium.find_chromium() is None:
        print("skipped: chromium is not installed")
        return 77
    os.makedirs(work, exist_ok=True)
    page = os.path.join(work, "toy_attention.html")
    subprocess.run([binary, page], check=True)
    failures = []
    with chromium.Page(page, 900, 600) as p:
        png = p.screenshot(os.path.join(work, "toy_attention.png"))
        if not chromium.not_blank(png):
            failures.append("the screenshot is blank")
        shown = p.eval("JSON.parse(document.getElementById('row').dataset.weights)")
        output = p.eval("document.getElementById('output').textContent")
        if [round(w * 100, 1) for w in shown] != [18.0, 12.0, 40.0, 10.0, 20.0]:
            failures.append("first row shows %r" % shown)
        if not output.endswith("= 30.2"):
            failures.append("first row's output reads %r" % output)
        pcts = p.eval("[...document.querySelectorAll('#keys .pct')].map(e => e.textContent)")
        if pcts != ["18.0%", "12.0%", "40.0%", "10.0%", "20.0%"]:
            failures.append("the key tokens show %r" % pcts)
        p.click('#queries .tok[data-index="1"]')
        shown = p.eval("JSON.parse(document.getElementById('row').dataset.weights)")
        output = p.eval("document.getElementById('output').textContent")
        if [round(w * 100, 1) for w in shown] != [10.0, 8.0, 55.0, 10.0, 17.0]:
            failures.append("after the click the row shows %r" % shown)
        if not output.endswith("= 31.6"):
            failures.append("after the click the output reads %r" % output)
        if p.requests_outside():
            failures.append("outside requests: %r" % p.requests_outside())
    for f in failures:
        print("FAIL:", f)
    print("toy attention page: %s" % ("ok" if not failures else "%d failures" % len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
