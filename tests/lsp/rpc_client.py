#!/usr/bin/env python3
"""Drives `tfmc lsp` over JSON-RPC on its stdin/stdout, as an editor would,
and checks every request it serves, the diagnostics it publishes, and its
answers to malformed frames (bad Content-Length, invalid JSON, unknown
methods): errors, never a crash or a hang.

usage: rpc_client.py TFMC MODELS_DIR
Prints the time from a change of models/transformer.tfm to its diagnostics.
"""
import json
import os
import select
import subprocess
import sys
import time

TFMC, MODELS = sys.argv[1], os.path.abspath(sys.argv[2])
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


class Server:
    def __init__(self, *args):
        self.p = subprocess.Popen([TFMC, "lsp", *args], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
        self.next_id = 1
        self.pending = []  # messages read while waiting for another

    def send_raw(self, data):
        self.p.stdin.write(data)
        self.p.stdin.flush()

    def send(self, obj):
        body = json.dumps(obj).encode()
        self.send_raw(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def read(self, timeout=10.0):
        """One message from the server (a timeout is a hang: a failure)."""
        if self.pending:
            return self.pending.pop(0)
        out = self.p.stdout
        deadline = time.time() + timeout
        header = b""
        while not header.endswith(b"\r\n\r\n"):
            if not select.select([out], [], [], max(0, deadline - time.time()))[0]:
                raise TimeoutError("no answer from tfmc lsp")
            c = out.read(1)
            if not c:
                raise EOFError("tfmc lsp closed its output")
            header += c
        length = int(header.split(b"Content-Length:")[1].split(b"\r\n")[0])
        body = b""
        while len(body) < length:
            if not select.select([out], [], [], max(0, deadline - time.time()))[0]:
                raise TimeoutError("tfmc lsp stopped inside a message")
            chunk = out.read(length - len(body))
            if not chunk:
                raise EOFError("tfmc lsp closed its output inside a message")
            body += chunk
        return json.loads(body)

    def request(self, method, params=None):
        rid = self.next_id
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        while True:
            m = self.read()
            if m.get("id") == rid:
                return m
            self.pending_notifications.append(m)

    pending_notifications = []

    def notify(self, method, params):
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def diagnostics(self, uri):
        """The next publishDiagnostics for uri."""
        for i, m in enumerate(self.pending_notifications):
            if m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"] == uri:
                del self.pending_notifications[i]
                return m["params"]["diagnostics"]
        while True:
            m = self.read()
            if m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"] == uri:
                return m["params"]["diagnostics"]


def uri_of(path):
    return "file://" + path


def position_of(text, needle, nth=0, offset=0):
    """The LSP position of the nth occurrence of needle (plus offset chars)."""
    at = -1
    for _ in range(nth + 1):
        at = text.index(needle, at + 1)
    at += offset
    line = text.count("\n", 0, at)
    return {"line": line, "character": at - (text.rfind("\n", 0, at) + 1)}


def open_document(server, path):
    """Opens the file at path in the server; returns (text, uri)."""
    text = open(path).read()
    server.notify("textDocument/didOpen", {"textDocument": {
        "uri": uri_of(path), "languageId": "tfm", "version": 1, "text": text}})
    return text, uri_of(path)


def hover_text(reply):
    r = reply.get("result")
    return r["contents"]["value"] if r else ""


# --- a session on models/gpt.tfm --------------------------------------------
s = Server()
r = s.request("textDocument/hover", {"textDocument": {"uri": "x"}, "position": {"line": 0, "character": 0}})
check(r.get("error", {}).get("code") == -32002, "a request before initialize is refused (-32002)")
r = s.request("initialize", {"processId": None, "rootUri": uri_of(MODELS), "capabilities": {},
                             "initializationOptions": {"defines": ["layers=2"]}})
caps = r["result"]["capabilities"]
check(caps.get("hoverProvider") and caps.get("definitionProvider") and
      caps.get("documentSymbolProvider") and "completionProvider" in caps,
      "initialize announces hover, definition, symbols and completion")
check(caps["textDocumentSync"]["change"] == 2, "initialize asks for incremental changes")
s.notify("initialized", {})

gpt, gpt_uri = open_document(s, os.path.join(MODELS, "gpt.tfm"))
check(s.diagnostics(gpt_uri) == [], "models/gpt.tfm opens without diagnostics")

r = s.request("textDocument/hover", {"textDocument": {"uri": gpt_uri},
                                     "position": position_of(gpt, "x = block[i](x", offset=13)})
check("f32[batch=16, seq_len=128, d_model=256]" in hover_text(r),
      "hover on x in the block loop: %r" % hover_text(r))
r = s.request("textDocument/hover", {"textDocument": {"uri": gpt_uri},
                                     "position": position_of(gpt, "d_model = 256")})
check("config d_model: int = 256" in hover_text(r), "hover on a config key: %r" % hover_text(r))
r = s.request("textDocument/hover", {"textDocument": {"uri": gpt_uri},
                                     "position": position_of(gpt, "layers", nth=1)})
check("overridden by -D layers=2" in hover_text(r) or "layers = 2" in hover_text(r),
      "initializationOptions.defines reach the checker: %r" % hover_text(r))
r = s.request("textDocument/hover", {"textDocument": {"uri": gpt_uri},
                                     "position": {"line": 0, "character": 3}})
check(r.get("result") is None and "error" not in r, "hover in a comment is null")

r = s.request("textDocument/definition", {"textDocument": {"uri": gpt_uri},
                                          "position": position_of(gpt, "layernorm(d_model)")})
loc = r.get("result") or {}
check(loc.get("uri", "").endswith("/std/nn.tfm"), "definition of layernorm is in std/nn.tfm: %r" % loc)
r = s.request("textDocument/definition", {"textDocument": {"uri": gpt_uri},
                                          "position": position_of(gpt, "wte(tokens)")})
loc = r.get("result") or {}
check(loc.get("uri") == gpt_uri and loc["range"]["start"]["line"] ==
      position_of(gpt, "let wte")["line"], "definition of wte is its let")
r = s.request("textDocument/definition", {"textDocument": {"uri": gpt_uri},
                                          "position": position_of(gpt, "d_model)", nth=0)})
loc = r.get("result") or {}
check(loc.get("uri") == gpt_uri and loc["range"]["start"] == position_of(gpt, "d_model = 256"),
      "definition of a config value is its entry: %r" % loc)
r = s.request("textDocument/definition", {"textDocument": {"uri": gpt_uri},
                                          "position": position_of(gpt, '"std/attention.tfm"')})
loc = r.get("result") or {}
check(loc.get("uri", "").endswith("/std/attention.tfm"), "definition of an import is its file")

r = s.request("textDocument/documentSymbol", {"textDocument": {"uri": gpt_uri}})
names = {(x["name"], x["kind"]) for x in r["result"]}
check(("gpt", 2) in names and ("config", 3) in names and ("train", 19) in names,
      "document symbols: model, config, train: %r" % sorted(names))
config = [x for x in r["result"] if x["name"] == "config"][0]
check("d_model" in [c["name"] for c in config["children"]], "config symbols hold the keys")

r = s.request("textDocument/completion", {"textDocument": {"uri": gpt_uri},
                                          "position": {"line": 30, "character": 0}})
labels = {i["label"] for i in r["result"]["items"]}
check({"softmax", "layernorm", "transpose", "d_model", "let", "f32"} <= labels,
      "completion offers std layers, built-ins, config keys and keywords")

# an incremental edit that breaks a shape: the diagnostic at the right line:col
bad = "  output loss = cross_entropy(logits, targets)"
line = gpt.split("\n").index(bad)
col = bad.index("targets")
s.notify("textDocument/didChange", {
    "textDocument": {"uri": gpt_uri, "version": 2},
    "contentChanges": [{"range": {"start": {"line": line, "character": col},
                                  "end": {"line": line, "character": col + len("targets")}},
                        "text": "tokens[0]"}]})
d = s.diagnostics(gpt_uri)
check(len(d) >= 1 and d[0]["range"]["start"]["line"] == line,
      "a shape error after an edit is reported on its line %d: %r" % (line + 1, d[:1]))
s.notify("textDocument/didChange", {"textDocument": {"uri": gpt_uri, "version": 3},
                                    "contentChanges": [{"text": gpt}]})
check(s.diagnostics(gpt_uri) == [], "a whole-text change back clears the diagnostic")

# a syntax error, a name error with a suggestion, non-ASCII before the error
broken = gpt.replace("let ln_f = layernorm(d_model)", "let ln_f = layernorm(d_modl)")
broken = broken.replace("# A decoder-only", "# Ünïcödé — A decoder-only")
s.notify("textDocument/didChange", {"textDocument": {"uri": gpt_uri, "version": 4},
                                    "contentChanges": [{"text": broken}]})
d = s.diagnostics(gpt_uri)
want = position_of(broken, "d_modl")
check(d and d[0]["range"]["start"] == want and "d_model" in d[0]["message"],
      "an unknown name at its line:col, with the suggestion: %r" % d[:1])
s.notify("textDocument/didChange", {"textDocument": {"uri": gpt_uri, "version": 5},
                                    "contentChanges": [{"text": "model m {\n  let = 3\n}\n"}]})
d = s.diagnostics(gpt_uri)
check(d and d[0]["range"]["start"]["line"] == 1, "a syntax error is reported: %r" % d[:1])

# an error inside a std layer shows in the document, at the call
std_err = gpt.replace("heads = 4", "heads = 3")
s.notify("textDocument/didChange", {"textDocument": {"uri": gpt_uri, "version": 6},
                                    "contentChanges": [{"text": std_err}]})
d = s.diagnostics(gpt_uri)
call = position_of(std_err, "encoder_layer(d_model")["line"]
check(any("/std/" in x["message"] and x["range"]["start"]["line"] == call for x in d),
      "an error in a std layer is shown at the call on line %d: %r" %
      (call + 1, [(x["range"]["start"], x["message"]) for x in d][:2]))

# a std file opened beside the model: no "defines no model" error, and its
# layers' shapes as the model used them
s.notify("textDocument/didChange", {"textDocument": {"uri": gpt_uri, "version": 7},
                                    "contentChanges": [{"text": gpt}]})
s.diagnostics(gpt_uri)
nn, nn_uri = open_document(s, os.path.join(MODELS, "std", "nn.tfm"))
d = s.diagnostics(nn_uri)
check(d == [], "a std file (no model block) opens without diagnostics: %r" % d[:1])
at = position_of(nn, "let xc = x - mean(x", offset=len("let xc = "))
r = s.request("textDocument/hover", {"textDocument": {"uri": nn_uri}, "position": at})
check("f32[batch=16, seq_len=128, d_model=256]" in hover_text(r),
      "hover in std/nn.tfm's layernorm shows x as gpt.tfm used it: %r" % hover_text(r))
s.notify("textDocument/didClose", {"textDocument": {"uri": nn_uri}})
s.diagnostics(nn_uri)

s.notify("textDocument/didClose", {"textDocument": {"uri": gpt_uri}})
check(s.diagnostics(gpt_uri) == [], "closing a document clears its diagnostics")

# --- latency: models/transformer.tfm, base config (a server without -D) -----
s = Server()
s.request("initialize", {"processId": None, "capabilities": {}})
s.notify("initialized", {})
tr, tr_uri = open_document(s, os.path.join(MODELS, "transformer.tfm"))
s.diagnostics(tr_uri)
times = []
for k in range(10):
    t0 = time.perf_counter()
    s.notify("textDocument/didChange", {
        "textDocument": {"uri": tr_uri, "version": 2 + k},
        "contentChanges": [{"range": {"start": {"line": 0, "character": 0},
                                      "end": {"line": 0, "character": 0}}, "text": "#\n"}]})
    s.diagnostics(tr_uri)
    times.append((time.perf_counter() - t0) * 1000)
times.sort()
print("latency: models/transformer.tfm (base config) change to diagnostics: median %.1f ms, "
      "max %.1f ms (10 changes)" % (times[5], times[-1]))
check(times[5] < 100, "diagnostics within 100 ms of a change (median %.1f ms)" % times[5])

# --- malformed input: errors, never a crash ---------------------------------
s.send_raw(b"Content-Length: 12\r\n\r\n{not json!!}")
m = s.read()
check(m.get("error", {}).get("code") == -32700 and m.get("id") is None, "invalid JSON: parse error")
s.send_raw(b"Content-Length: abc\r\n\r\n")
m = s.read()
check(m.get("error", {}).get("code") == -32700, "a bad Content-Length: an error")
s.send_raw(b"Content-Type: x\r\n\r\n")
m = s.read()
check(m.get("error", {}).get("code") == -32700, "no Content-Length: an error")
s.send_raw(b"Content-Length: 99999999999999999999\r\n\r\n")
m = s.read()
check(m.get("error", {}).get("code") == -32700, "an absurd Content-Length: an error")
r = s.request("textDocument/rename", {})
check(r.get("error", {}).get("code") == -32601, "an unknown method: method not found")
r = s.request("textDocument/hover", {"textDocument": {"uri": tr_uri}, "position": {"line": -1}})
check(r.get("error", {}).get("code") == -32602, "a bad position: invalid params")
r = s.request("textDocument/hover", {"textDocument": {"uri": "file:///nope.tfm"},
                                     "position": {"line": 0, "character": 0}})
check(r.get("error", {}).get("code") == -32602, "a document not open: invalid params")
s.send({"jsonrpc": "2.0", "id": "str-id", "method": "textDocument/documentSymbol",
        "params": {"textDocument": {"uri": tr_uri}}})
m = s.read()
while m.get("id") != "str-id":
    m = s.read()
check(isinstance(m.get("result"), list), "a string id is answered with the same id")
s.send_raw(b'Content-Length: 2\r\n\r\n[]')
m = s.read()
check(m.get("error", {}).get("code") == -32600, "a JSON array is an invalid request")
s.notify("textDocument/didChange", {"textDocument": {"uri": "file:///nope.tfm"},
                                    "contentChanges": []})
m = s.read()
check(m.get("method") == "window/logMessage", "a notification that fails is logged to the client")
r = s.request("textDocument/hover", {"textDocument": {"uri": tr_uri},
                                     "position": {"line": 10 ** 6, "character": 10 ** 6}})
check("error" not in r, "a position past the end is answered")

r = s.request("shutdown")
check("result" in r and r["result"] is None, "shutdown")
s.notify("exit", None)
try:
    code = s.p.wait(timeout=10)
except subprocess.TimeoutExpired:
    s.p.kill()
    code = "hang"
check(code == 0, "exit after shutdown: status 0 (got %r)" % code)
err = s.p.stderr.read().decode(errors="replace")
check("Sanitizer" not in err and "runtime error" not in err, "no sanitizer report: %s" % err[:400])

# --- exit without shutdown, and a stream cut inside a message ---------------
s = Server()
s.send_raw(b"Content-Length: 100\r\n\r\n{\"jsonrpc\"")
s.p.stdin.close()
check(s.p.wait(timeout=10) == 1, "a stream cut inside a message: the server stops (status 1)")

if failures:
    print("%d check(s) failed" % len(failures))
    sys.exit(1)
print("all checks passed")
