#!/usr/bin/env python3
"""Training curves of one or more runs as one self-contained HTML page.

    tools/report.py RUN.jsonl [NAME=RUN2.jsonl ...] -o PAGE.html [--title T]

Each input is a metrics file written by a compiled model's
`train --metrics FILE.jsonl` (docs/pictures.md, "Training curves"): a
"run" line (model, source, config, seed, threads, steps, started), then one
"step" line per logged step (step, loss, lr, tokens_per_s, grad_norm,
wall_s and, with held-out data, test_loss). A resumed run appends another
"run" line and goes on; where the resumed run logs a step again, its line
wins.

The page draws training and held-out loss against step and against wall
time, every run in its own colour (held-out loss dashed), then learning
rate, gradient norm and throughput against step where the files have them;
a legend names each run (the file's stem, or NAME) and a table compares the
configs, the keys whose values differ between runs first and highlighted.
Everything is inline (SVG, CSS, a little JavaScript for the log-scale switch
and the hover read-out); the page loads nothing.

Exit status: 0 when the page was written, 1 for a bad input (a missing or
unreadable file, a line that is not JSON, a file without step lines), 2 for
a bad command line. Python 3.11, standard library only.
"""

import argparse
import html
import json
import math
import os
import sys

PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
           "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"]

# Points of one line drawn at most; longer series keep each bucket's first,
# lowest and highest point, so spikes survive.
MAX_POINTS = 1500


class InputError(Exception):
    """A problem with an input file, reported as 'report.py: error: ...'."""


# --------------------------------------------------------------------------
# Reading the metrics files

def number(value):
    """A finite float from a JSON number, or None (null, missing, NaN, text)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def read_run(name, path):
    """The run in one metrics file: its run headers and its steps."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raise InputError(f"{path}: no such file")
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, not a metrics file")
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror or e}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[:e.start].count(b"\n") + 1
        raise InputError(f"{path}:{line}: not UTF-8 text")
    headers, steps = [], {}
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except (json.JSONDecodeError, RecursionError) as e:
            msg = e.msg if isinstance(e, json.JSONDecodeError) else "nested too deeply"
            raise InputError(f"{path}:{lineno}: not JSON ({msg}): {shorten(line)}")
        if not isinstance(obj, dict):
            raise InputError(f"{path}:{lineno}: a metrics line is a JSON object, "
                             f"not {type(obj).__name__}: {shorten(line)}")
        kind = obj.get("kind")
        if kind == "run":
            config = obj.get("config")
            if config is None:
                config = {}
            if not isinstance(config, dict):
                raise InputError(f"{path}:{lineno}: \"config\" is not an object")
            headers.append({
                "line": lineno,
                "model": text_of(obj.get("model")),
                "source": text_of(obj.get("source")),
                "config": {str(k): text_of(v) for k, v in config.items()},
                "seed": text_of(obj.get("seed")),
                "threads": text_of(obj.get("threads")),
                "steps": text_of(obj.get("steps")),
                "started": text_of(obj.get("started")),
                "first_step": None,
            })
        elif kind == "step":
            step = number(obj.get("step"))
            if step is None:
                raise InputError(f"{path}:{lineno}: a step line without a numeric \"step\"")
            point = {key: number(obj.get(key)) for key in
                     ("loss", "test_loss", "lr", "grad_norm", "tokens_per_s", "wall_s")}
            point["step"] = step
            point["resume"] = len(headers)
            if headers and headers[-1]["first_step"] is None:
                headers[-1]["first_step"] = step
            steps[step] = point    # a resumed run's line for a step replaces the earlier one
        # other kinds: lines a later writer may add; ignored
    if not steps:
        raise InputError(f"{path}: no step lines (is it a `train --metrics` file?)")
    points = [steps[s] for s in sorted(steps)]
    if not headers:
        headers.append({"line": 0, "model": "", "source": "", "config": {}, "seed": "",
                        "threads": "", "steps": "", "started": "", "first_step": None})
    return {"name": name, "path": path, "headers": headers, "points": points}


def text_of(value):
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value)


def shorten(line, limit=60):
    line = line.strip()
    return line if len(line) <= limit else line[:limit] + "..."


def parse_inputs(args):
    """(name, path) for each argument: PATH or NAME=PATH."""
    out, seen = [], {}
    for arg in args:
        name, sep, path = arg.partition("=")
        if not sep or not name or os.path.exists(arg):
            name, path = os.path.splitext(os.path.basename(arg))[0] or arg, arg
        if not path:
            raise InputError(f"'{arg}': NAME=PATH needs a path")
        base = name
        seen[base] = seen.get(base, 0) + 1
        if seen[base] > 1:
            name = f"{base} ({seen[base]})"
        out.append((name, path))
    return out


# --------------------------------------------------------------------------
# Comparing configs

def run_fields(run):
    """The settings of a run shown in the config table, config keys first."""
    first = run["headers"][0]
    fields = dict(first["config"])
    for key in ("model", "source", "seed", "threads"):
        if first[key]:
            fields.setdefault(key, first[key])
    last = run["headers"][-1]
    if last["steps"]:
        fields.setdefault("steps", last["steps"])
    # a resume that changed a setting shows both values
    for h in run["headers"][1:]:
        for key, value in h["config"].items():
            if fields.get(key) != value and value not in fields.get(key, "").split(" -> "):
                fields[key] = f"{fields[key]} -> {value}" if key in fields else value
    return fields


def compare(runs):
    """Table rows (key, values, differs), differing keys first."""
    fields = [run_fields(r) for r in runs]
    keys = []
    for f in fields:
        keys.extend(k for k in f if k not in keys)
    rows = []
    for k in keys:
        values = [f.get(k) for f in fields]
        rows.append((k, values, len(runs) > 1 and len(set(values)) > 1))
    rows.sort(key=lambda row: not row[2])   # stable: differing first, each in file order
    return rows


# --------------------------------------------------------------------------
# Axes

def nice_step(span, count):
    raw = span / max(count, 1)
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


def linear_ticks(lo, hi, count=6):
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    step = nice_step(hi - lo, count)
    start = math.floor(lo / step + 1e-9) * step
    stop = math.ceil(hi / step - 1e-9) * step
    ticks, t = [], start
    while t <= stop + step * 1e-6:
        ticks.append(round(t, 12))
        t += step
    return start, stop, ticks


def log_ticks(lo, hi):
    """Axis ends and ticks for positive lo..hi on a log scale."""
    lo_e, hi_e = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    for mults in ((1,), (1, 2, 5), (1, 1.5, 2, 3, 4, 5, 6, 8), tuple(range(10, 100))):
        cands = [m / (10 if m >= 10 else 1) * 10 ** e
                 for e in range(lo_e - 1, hi_e + 1) for m in mults]
        inside = sorted({round(c, 12) for c in cands if lo <= c <= hi})
        if len(inside) >= 3 or mults[0] == 10:
            break
    if len(inside) > 10:
        inside = inside[::math.ceil(len(inside) / 8)]
    below = [c for c in cands if c <= lo]
    above = [c for c in cands if c >= hi]
    a = max(below) if below else lo
    b = min(above) if above else hi
    # pad to the nearest tick only where that does not squash the curves
    if math.log10(hi / lo) > 0 and math.log10(b / a) > 1.6 * math.log10(hi / lo):
        pad = 0.04 * math.log10(hi / lo)
        a, b = lo / 10 ** pad, hi * 10 ** pad
    return a, b, inside


def fmt(v):
    """A tick or read-out value, short."""
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1e6 or a < 1e-3:
        s = f"{v:.3g}"
        m, _, e = s.partition("e")
        return f"{m}e{int(e)}" if e else s
    if a >= 1000:
        return f"{v:,.0f}" if a < 1e5 or v == int(v) else f"{v:.4g}"
    return f"{v:.4g}"


def fmt_time(s):
    if s < 120:
        return f"{fmt(s)} s"
    if s < 7200:
        return f"{fmt(s / 60)} min"
    return f"{fmt(s / 3600)} h"


def decimate(points):
    if len(points) <= MAX_POINTS:
        return points
    bucket = math.ceil(len(points) / (MAX_POINTS / 3))
    out = []
    for i in range(0, len(points), bucket):
        chunk = points[i:i + bucket]
        keep = {0, min(range(len(chunk)), key=lambda j: chunk[j][1]),
                max(range(len(chunk)), key=lambda j: chunk[j][1])}
        out.extend(chunk[j] for j in sorted(keep))
    if out[-1] is not points[-1]:
        out.append(points[-1])
    return out


# --------------------------------------------------------------------------
# Charts

W, H = 560, 330
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 14, 46


def esc(s):
    return html.escape(str(s), quote=True)


def chart(cid, title, xlabel, ylabel, series, xtime=False, allow_log=False):
    """One SVG chart: series = [(run index, colour, dashed, label, [(x, y)])].

    Returns '' when no series has a point. With allow_log (and positive
    values) the chart holds a linear and a log version of its y axis; the
    page's switch shows one."""
    pts = [p for s in series for p in s[4]]
    if not pts:
        return ""
    xs = [p[0] for p in pts]
    ys = [p[1] for p in pts]
    x0, x1, xt = linear_ticks(min(xs), max(xs), 7)
    if min(xs) >= 0 and x0 < 0:
        x0 = 0
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM

    def sx(x):
        return LEFT + (x - x0) / (x1 - x0) * pw

    scales = []
    lo, hi = min(ys), max(ys)
    y0, y1, yt = linear_ticks(lo, hi, 6)
    scales.append(("lin", lambda y: TOP + ph - (y - y0) / (y1 - y0) * ph, yt, (y0, y1)))
    if allow_log and lo > 0:
        a, b, lt = log_ticks(lo, hi)
        la, lb = math.log10(a), math.log10(b)
        scales.append(("log", lambda y: TOP + ph - (math.log10(y) - la) / (lb - la) * ph,
                       lt, (a, b)))

    out = [f'<figure class="chart" id="{cid}"><figcaption>{esc(title)}</figcaption>'
           f'<svg viewBox="0 0 {W} {H}" role="img" aria-label="{esc(title)}" '
           f'data-x0="{x0!r}" data-x1="{x1!r}" data-left="{LEFT}" data-pw="{pw}" '
           f'data-top="{TOP}" data-ph="{ph}" data-time="{int(xtime)}">']
    out.append(f'<rect class="frame" x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}"/>')
    # x axis (shared by the scales)
    for t in xt:
        if x0 - 1e-9 <= t <= x1 + 1e-9:
            x = sx(t)
            out.append(f'<line class="grid" x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{TOP + ph}"/>'
                       f'<text class="tick" x="{x:.1f}" y="{TOP + ph + 16}" '
                       f'text-anchor="middle">{esc(fmt_time(t) if xtime else fmt(t))}</text>')
    out.append(f'<text class="label" x="{LEFT + pw / 2:.1f}" y="{H - 8}" '
               f'text-anchor="middle">{esc(xlabel)}</text>')
    out.append(f'<text class="label" transform="translate(14 {TOP + ph / 2:.1f}) rotate(-90)" '
               f'text-anchor="middle">{esc(ylabel)}</text>')
    for name, sy, ticks, (ya, yb) in scales:
        hidden = ' style="display:none"' if name == "log" else ""
        out.append(f'<g class="scale-{name}" data-y0="{ya!r}" data-y1="{yb!r}"{hidden}>')
        for t in ticks:
            y = sy(t)
            if TOP - 0.5 <= y <= TOP + ph + 0.5:
                out.append(f'<line class="grid" x1="{LEFT}" y1="{y:.1f}" x2="{LEFT + pw}" '
                           f'y2="{y:.1f}"/><text class="tick" x="{LEFT - 6}" y="{y + 4:.1f}" '
                           f'text-anchor="end">{esc(fmt(t))}</text>')
        for run, colour, dashed, label, points in series:
            if not points:
                continue
            shown = decimate(points)
            coords = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in shown)
            dash = ' stroke-dasharray="6 4"' if dashed else ""
            out.append(f'<polyline class="line run{run}" data-run="{run}" points="{coords}" '
                       f'stroke="{colour}"{dash}><title>{esc(label)}</title></polyline>')
            if dashed or len(points) <= 60:
                # sparse series (held-out loss): a marker with its values
                for x, y in shown[:200] if len(shown) > 200 else shown:
                    xv = fmt_time(x) if xtime else f"step {fmt(x)}"
                    out.append(f'<circle class="pt run{run}" data-run="{run}" cx="{sx(x):.1f}" '
                               f'cy="{sy(y):.1f}" r="2.6" fill="{colour}"><title>'
                               f'{esc(label)}: {esc(fmt(y))} at {esc(xv)}</title></circle>')
        out.append("</g>")
    out.append(f'<line class="cursor" x1="0" y1="{TOP}" x2="0" y2="{TOP + ph}" '
               f'style="display:none"/>')
    out.append('</svg><div class="readout" aria-live="polite"></div></figure>')
    return "".join(out)


def series_of(runs, colours, xkey, ykey, label_suffix, dashed=False):
    out = []
    for i, run in enumerate(runs):
        pts = [(p[xkey], p[ykey]) for p in run["points"]
               if p[xkey] is not None and p[ykey] is not None]
        if pts:
            out.append((i, colours[i], dashed, f"{run['name']} {label_suffix}", pts))
    return out


def loss_series(runs, colours, xkey):
    return (series_of(runs, colours, xkey, "loss", "training loss")
            + series_of(runs, colours, xkey, "test_loss", "held-out loss", dashed=True))


# --------------------------------------------------------------------------
# The page

CSS = """
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:16px 20px;color:#222;background:#fff}
h1{font-size:20px;margin:0 0 4px}
.sub{color:#666;margin:0 0 10px}
.controls{margin:6px 0 10px}
.controls label{margin-right:16px;cursor:pointer}
table.runs{border-collapse:collapse;margin:4px 0 8px}
table.runs th,table.runs td{border:1px solid #ddd;padding:2px 8px;text-align:left;vertical-align:top}
table.runs th{background:#f6f6f6;font-weight:600}
table.runs td.key{font-family:ui-monospace,monospace}
tr.diff td,tr.diff th{background:#fff3bf}
tr.diff td.key{font-weight:700}
tr.same td{color:#555}
.swatch{display:inline-block;width:22px;height:0;border-top:3px solid;vertical-align:middle;margin-right:6px}
.swatch.dash{border-top-style:dashed}
.legend-note{color:#666;font-size:12px}
.grid-charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(420px,1fr));gap:4px 18px}
figure.chart{margin:0;position:relative}
figure.chart figcaption{font-weight:600;margin:6px 0 0 64px}
figure.chart svg{width:100%;height:auto;display:block}
.frame{fill:none;stroke:#999}
.grid{stroke:#eee}
.tick{font-size:11px;fill:#555}
.label{font-size:12px;fill:#333}
.line{fill:none;stroke-width:1.6;stroke-linejoin:round}
.cursor{stroke:#888;stroke-dasharray:2 3}
.readout{position:absolute;top:26px;right:22px;background:rgba(255,255,255,.92);border:1px solid #ccc;
 padding:2px 6px;font-size:12px;display:none;pointer-events:none;white-space:nowrap}
body.hide-test .dashed,body.hide-test polyline[stroke-dasharray],body.hide-test circle.pt{display:none}
.run-off{display:none}
details{margin:4px 0}
"""

JS = r"""
(function(){
  var data = JSON.parse(document.getElementById('tfm-data').textContent);
  function setScale(log){
    document.body.classList.toggle('log', log);
    document.querySelectorAll('.scale-lin').forEach(function(g){
      g.style.display = (log && g.parentNode.querySelector('.scale-log')) ? 'none' : '';});
    document.querySelectorAll('.scale-log').forEach(function(g){
      g.style.display = log ? '' : 'none';});
  }
  var logBox = document.getElementById('logscale');
  if (logBox) { logBox.addEventListener('change', function(){ setScale(logBox.checked); });
                setScale(logBox.checked); }
  var testBox = document.getElementById('showtest');
  if (testBox) testBox.addEventListener('change', function(){
    document.body.classList.toggle('hide-test', !testBox.checked); });
  document.querySelectorAll('input.runtoggle').forEach(function(box){
    box.addEventListener('change', function(){
      document.querySelectorAll('.run' + box.dataset.run).forEach(function(el){
        el.classList.toggle('run-off', !box.checked); }); }); });
  function fmt(v){ if (v === null || v === undefined) return '-';
    var a = Math.abs(v); if (a !== 0 && (a >= 1e6 || a < 1e-3)) return v.toExponential(2);
    return String(+v.toPrecision(4)); }
  function nearest(points, key, x){
    var best = null, bd = Infinity;
    for (var i = 0; i < points.length; i++) { var p = points[i];
      if (p[key] === null) continue; var d = Math.abs(p[key] - x);
      if (d < bd) { bd = d; best = p; } }
    return best;
  }
  document.querySelectorAll('figure.chart').forEach(function(fig){
    var svg = fig.querySelector('svg'), out = fig.querySelector('.readout');
    var cur = svg.querySelector('.cursor');
    var key = svg.dataset.time === '1' ? 'wall_s' : 'step';
    var ys = (fig.dataset.y || 'loss,test_loss').split(',');
    var x0 = +svg.dataset.x0, x1 = +svg.dataset.x1, left = +svg.dataset.left, pw = +svg.dataset.pw;
    svg.addEventListener('mousemove', function(ev){
      var r = svg.getBoundingClientRect(), vx = (ev.clientX - r.left) * svg.viewBox.baseVal.width / r.width;
      if (vx < left || vx > left + pw) { out.style.display = 'none'; cur.style.display = 'none'; return; }
      var x = x0 + (vx - left) / pw * (x1 - x0), lines = [];
      data.runs.forEach(function(run, i){
        var off = document.querySelector('input.runtoggle[data-run="' + i + '"]');
        if (off && !off.checked) return;
        var p = nearest(run.points, key, x); if (!p) return;
        var parts = ys.map(function(k){ return p[k] === null ? null : (data.labels[k] || k) + ' ' + fmt(p[k]); })
                      .filter(function(s){ return s; });
        if (!parts.length) return;
        lines.push('<span style="color:' + data.colours[i] + '">\u25A0</span> ' + run.name_html +
                   ': step ' + p.step + (p.wall_s !== null ? ', ' + fmt(p.wall_s) + ' s' : '') + ', ' + parts.join(', '));
      });
      if (!lines.length) { out.style.display = 'none'; cur.style.display = 'none'; return; }
      out.innerHTML = lines.join('<br>'); out.style.display = 'block';
      cur.setAttribute('x1', vx); cur.setAttribute('x2', vx); cur.style.display = '';
    });
    svg.addEventListener('mouseleave', function(){ out.style.display = 'none'; cur.style.display = 'none'; });
  });
})();
"""


def summary(run):
    pts = run["points"]
    last = pts[-1]
    tests = [p["test_loss"] for p in pts if p["test_loss"] is not None]
    losses = [p["loss"] for p in pts if p["loss"] is not None]
    rate = [p["tokens_per_s"] for p in pts if p["tokens_per_s"] is not None]
    bits = [f"steps {fmt(pts[0]['step'])}&ndash;{fmt(last['step'])}"]
    if losses:
        bits.append(f"last loss {esc(fmt(losses[-1]))}")
    if tests:
        bits.append(f"best held-out {esc(fmt(min(tests)))}")
    if last["wall_s"] is not None:
        bits.append(f"wall {esc(fmt_time(last['wall_s']))}")
    if rate:
        bits.append(f"{esc(fmt(sorted(rate)[len(rate) // 2]))} tokens/s")
    resumes = len(run["headers"]) - 1
    if resumes:
        at = [fmt(h["first_step"]) for h in run["headers"][1:] if h["first_step"] is not None]
        bits.append(f"resumed {resumes}&times;" + (f" (at step {', '.join(at)})" if at else ""))
    return ", ".join(bits)


def page(runs, title):
    colours = [PALETTE[i % len(PALETTE)] for i in range(len(runs))]
    rows = compare(runs)
    differ = [r for r in rows if r[2]]
    same = [r for r in rows if not r[2]]

    def row_html(key, values, diff):
        cells = "".join(f"<td>{esc(v) if v is not None else '&mdash;'}</td>" for v in values)
        return f'<tr class="{"diff" if diff else "same"}"><td class="key">{esc(key)}</td>{cells}</tr>'

    head = "".join(
        f'<th><label><input type="checkbox" class="runtoggle" data-run="{i}" checked> '
        f'<span class="swatch" style="border-color:{c}"></span>'
        f'<span class="runname">{esc(r["name"])}</span></label></th>'
        for i, (r, c) in enumerate(zip(runs, colours)))
    sums = "".join(f"<td>{summary(r)}</td>" for r in runs)
    paths = "".join(f'<td class="key">{esc(r["path"])}</td>' for r in runs)
    table = [f'<table class="runs" id="runs"><tr><th>run</th>{head}</tr>',
             f'<tr><td class="key">file</td>{paths}</tr>',
             f'<tr><td class="key">summary</td>{sums}</tr>']
    table += [row_html(*r) for r in differ]
    if same and len(runs) > 1:
        table.append(f'<tr><th colspan="{len(runs) + 1}">the same in every run</th></tr>')
    table += [row_html(*r) for r in same]
    table.append("</table>")
    if len(runs) > 1:
        note = (f"{len(differ)} setting{'s' if len(differ) != 1 else ''} differ "
                f"({esc(', '.join(r[0] for r in differ))}), highlighted first."
                if differ else "Every setting is the same in every run.")
    else:
        note = ""

    has_test = any(p["test_loss"] is not None for r in runs for p in r["points"])
    has_wall = any(p["wall_s"] is not None for r in runs for p in r["points"])
    charts = [
        chart("loss-step", "Loss against step", "step", "loss",
              loss_series(runs, colours, "step"), allow_log=True),
        chart("loss-time", "Loss against wall time", "wall time", "loss",
              loss_series(runs, colours, "wall_s"), xtime=True, allow_log=True)
        if has_wall else "",
    ]
    extra = [
        ("lr", "Learning rate", "lr", False),
        ("grad_norm", "Gradient norm (before clipping)", "grad norm", True),
        ("tokens_per_s", "Throughput", "tokens / s", False),
    ]
    more = []
    for key, t, yl, log in extra:
        c = chart(f"{key}-step", t, "step", yl,
                  series_of(runs, colours, "step", key, yl), allow_log=log)
        if c:
            more.append(c.replace('<figure class="chart"', f'<figure class="chart" data-y="{key}"', 1))

    data = {
        "colours": colours,
        "labels": {"loss": "loss", "test_loss": "held-out", "lr": "lr",
                   "grad_norm": "grad norm", "tokens_per_s": "tokens/s"},
        "runs": [{"name_html": esc(r["name"]),
                  "points": [{k: p[k] for k in ("step", "loss", "test_loss", "lr", "grad_norm",
                                                "tokens_per_s", "wall_s")}
                             for p in r["points"]]} for r in runs],
    }
    blob = json.dumps(data, separators=(",", ":")).replace("<", "\\u003c")
    legend = (f'<span class="swatch"></span>training loss &nbsp; '
              f'<span class="swatch dash"></span>held-out loss' if has_test
              else '<span class="swatch"></span>training loss')
    controls = ['<div class="controls">',
                '<label><input type="checkbox" id="logscale"> log-scale loss</label>']
    if has_test:
        controls.append('<label><input type="checkbox" id="showtest" checked> held-out loss</label>')
    controls.append(f'<span class="legend-note">{legend} &middot; hover a chart for values</span></div>')
    sub = f"{len(runs)} run{'s' if len(runs) != 1 else ''}: " + ", ".join(
        f'<span style="color:{c}">&#9632;</span> {esc(r["name"])}' for r, c in zip(runs, colours))
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{esc(title)}</title>",
        f"<style>{CSS}</style></head><body>",
        f"<h1>{esc(title)}</h1>",
        f'<p class="sub">{sub}. {note}</p>',
        "".join(controls),
        '<div class="grid-charts">' + "".join(charts) + "</div>",
        "".join(table),
        '<div class="grid-charts">' + "".join(more) + "</div>" if more else "",
        f'<script type="application/json" id="tfm-data">{blob}</script>',
        f"<script>{JS}</script>",
        "</body></html>",
        "",
    ])


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="report.py",
        description="Training curves of one or more `train --metrics` files as one "
                    "self-contained HTML page.")
    ap.add_argument("runs", nargs="+", metavar="[NAME=]RUN.jsonl",
                    help="a metrics file; NAME= names its run (default: the file's stem)")
    ap.add_argument("-o", "--output", required=True, metavar="PAGE.html",
                    help="the page to write")
    ap.add_argument("--title", help="the page's title (default: the runs' names)")
    args = ap.parse_args(argv)
    try:
        runs = [read_run(name, path) for name, path in parse_inputs(args.runs)]
        title = args.title or "Training curves: " + ", ".join(r["name"] for r in runs)
        text = page(runs, title)
        try:
            tmp = args.output + ".tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, args.output)
        except OSError as e:
            raise InputError(f"{args.output}: cannot write: {e.strerror or e}")
    except InputError as e:
        print(f"report.py: error: {e}", file=sys.stderr)
        return 1
    print(f"wrote {args.output} ({len(runs)} run{'s' if len(runs) != 1 else ''})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
