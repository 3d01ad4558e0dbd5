#!/usr/bin/env python3
"""Open a local HTML page in headless Chromium, offline, and look at it.

A small harness over the DevTools protocol on a pipe
(`--remote-debugging-pipe`: Chromium reads commands on its fd 3 and writes
replies and events on its fd 4, each message a JSON object ended by a NUL
byte). Python 3.11, standard library only.

    with Page("page.html", 1000, 700) as p:
        p.screenshot("shot.png")        # PNG bytes, also written to the path
        p.eval("document.title")        # the value (returned by value)
        p.click("#logscale")            # real mouse events at the centre
        p.requests_outside()            # [] unless the page asked for the network

Networking is off three ways: every host name resolves to nothing
(--host-resolver-rules), every connection goes to a proxy that is not there
(--proxy-server=127.0.0.1:9), and the page's network is emulated offline.
Each request that is not file:, data:, blob: or about: is recorded
(Network.requestWillBeSent) and requests_outside() lists them: a
self-contained page has none.

Every wait has a time-out (ChromiumError on expiry, never a hang).
Chromium is /usr/lib/chromium/chromium, `chromium` or `chromium-browser` on
PATH, or TFM_CHROMIUM; find_chromium() returns None without one, and the
command line and tests exit 77 (skipped) then.

not_blank(png) decodes a PNG (8-bit RGB or RGBA, not interlaced, filters
0-4) with zlib and asks for a fraction of pixels unlike the background and
several distinct colours.

Command line:
    chromium.py PAGE.html [--width W] [--height H] [--screenshot OUT.png]
                [--click SELECTOR]... [--eval JS]... [--full-page]
exits 0 when the page loaded, is not blank and made no outside request,
1 otherwise, 77 when Chromium is not installed.
"""

import argparse
import base64
import collections
import fcntl
import json
import os
import pathlib
import queue
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zlib

SKIP = 77
LOCAL_SCHEMES = ("file:", "data:", "blob:", "about:")


class ChromiumError(Exception):
    pass


def find_chromium():
    """The Chromium executable, or None."""
    env = os.environ.get("TFM_CHROMIUM")
    if env:
        return env if os.access(env, os.X_OK) else None
    # Debian's /usr/bin/chromium is a shell wrapper around this one
    for path in ("/usr/lib/chromium/chromium",):
        if os.access(path, os.X_OK):
            return path
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _high_fd(fd):
    """A copy of fd numbered 10 or more (so that 3 and 4 are free to take)."""
    new = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return new


class Page:
    """One headless Chromium with one tab showing a local file."""

    def __init__(self, path, width=1000, height=700, timeout=30.0, chromium=None):
        self.path = pathlib.Path(path).resolve()
        self.width, self.height, self.timeout = int(width), int(height), float(timeout)
        self.chromium = chromium or find_chromium()
        if not self.chromium:
            raise ChromiumError("chromium is not installed")
        self.proc = None
        self.profile = None
        self._next_id = 0
        self._replies = {}
        self._events = []
        self._outside = []
        self._messages = queue.Queue()
        self._session = None
        self._stderr = None

    # --- the process and the pipe ---------------------------------------

    def __enter__(self):
        try:
            self.open()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()

    def open(self):
        if not self.path.is_file():
            raise ChromiumError(f"{self.path}: no such file")
        self.profile = tempfile.mkdtemp(prefix="tfm-chromium-")
        cmd_r, cmd_w = (_high_fd(fd) for fd in os.pipe())    # we write commands
        rep_r, rep_w = (_high_fd(fd) for fd in os.pipe())    # it writes replies

        def child_fds():
            os.dup2(cmd_r, 3)       # os.dup2 makes 3 and 4 inheritable
            os.dup2(rep_w, 4)

        args = [
            self.chromium, "--headless", "--no-sandbox", "--disable-gpu",
            "--remote-debugging-pipe", f"--user-data-dir={self.profile}",
            f"--window-size={self.width},{self.height}", "--force-device-scale-factor=1",
            "--hide-scrollbars", "--no-first-run", "--no-default-browser-check",
            "--disable-extensions", "--disable-background-networking", "--disable-sync",
            "--disable-component-update", "--disable-default-apps", "--disable-dev-shm-usage",
            "--disable-features=Translate,MediaRouter,OptimizationHints,AutofillServerCommunication",
            "--metrics-recording-only", "--mute-audio", "--no-pings",
            "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9",
            "--proxy-bypass-list=<-loopback>", "about:blank",
        ]
        self._stderr = tempfile.TemporaryFile()
        try:
            self.proc = subprocess.Popen(
                args, stdin=subprocess.DEVNULL, stdout=self._stderr, stderr=self._stderr,
                pass_fds=(3, 4), preexec_fn=child_fds, start_new_session=True)
        except OSError as e:
            for fd in (cmd_r, cmd_w, rep_r, rep_w):
                os.close(fd)
            raise ChromiumError(f"cannot start {self.chromium}: {e}")
        os.close(cmd_r)
        os.close(rep_w)
        self._wfd, self._rfd = cmd_w, rep_r
        threading.Thread(target=self._reader, daemon=True).start()

        target = self.call("Target.createTarget", {"url": "about:blank"}, session=False)
        attached = self.call("Target.attachToTarget",
                             {"targetId": target["targetId"], "flatten": True}, session=False)
        self._session = attached["sessionId"]
        self.call("Page.enable")
        self.call("Runtime.enable")
        self.call("Network.enable")
        self.call("Network.emulateNetworkConditions",
                  {"offline": True, "latency": 0, "downloadThroughput": -1,
                   "uploadThroughput": -1})
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": self.width, "height": self.height, "deviceScaleFactor": 1,
                   "mobile": False})
        self.navigate(self.path.as_uri())

    def _reader(self):
        buf = b""
        while True:
            try:
                chunk = os.read(self._rfd, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                self._messages.put(None)
                return
            buf += chunk
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                try:
                    self._messages.put(json.loads(raw))
                except ValueError:
                    self._messages.put({"bad": raw[:200].decode("utf-8", "replace")})

    def _pump(self, deadline, what):
        """Take one message from Chromium, waiting at most until deadline."""
        left = deadline - time.monotonic()
        if left <= 0:
            raise ChromiumError(f"timed out after {self.timeout:g} s waiting for {what}")
        try:
            msg = self._messages.get(timeout=left)
        except queue.Empty:
            raise ChromiumError(f"timed out after {self.timeout:g} s waiting for {what}")
        if msg is None:
            self._messages.put(None)    # every later wait sees the end too
            raise ChromiumError(f"chromium closed the pipe while waiting for {what}"
                                f"{self._stderr_tail()}")
        if "id" in msg:
            self._replies[msg["id"]] = msg
        elif "method" in msg:
            self._events.append(msg)
            if msg["method"] == "Network.requestWillBeSent":
                url = msg.get("params", {}).get("request", {}).get("url", "")
                if not url.startswith(LOCAL_SCHEMES):
                    self._outside.append(url)

    def _stderr_tail(self):
        try:
            self._stderr.seek(0)
            text = self._stderr.read().decode("utf-8", "replace").strip()
        except (OSError, ValueError, AttributeError):
            return ""
        return ("; its output ends:\n" + text[-2000:]) if text else ""

    def call(self, method, params=None, session=True, timeout=None):
        """Send one command and wait for its reply's result."""
        self._next_id += 1
        mid = self._next_id
        msg = {"id": mid, "method": method, "params": params or {}}
        if session and self._session:
            msg["sessionId"] = self._session
        data = json.dumps(msg).encode() + b"\0"
        try:
            while data:
                data = data[os.write(self._wfd, data):]
        except OSError as e:
            raise ChromiumError(f"cannot send {method}: {e}{self._stderr_tail()}")
        deadline = time.monotonic() + (timeout or self.timeout)
        while mid not in self._replies:
            self._pump(deadline, f"the reply to {method}")
        reply = self._replies.pop(mid)
        if "error" in reply:
            raise ChromiumError(f"{method}: {reply['error'].get('message', reply['error'])}")
        return reply.get("result", {})

    def wait_event(self, method, since=0, timeout=None):
        """The first event `method` at or after index since of the events seen."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            for ev in self._events[since:]:
                if ev["method"] == method and ev.get("sessionId", self._session) == self._session:
                    return ev.get("params", {})
            since = len(self._events)
            self._pump(deadline, f"the event {method}")

    def close(self):
        proc, self.proc = self.proc, None
        if proc is not None:
            try:
                data = json.dumps({"id": 10 ** 9, "method": "Browser.close"}).encode() + b"\0"
                os.write(self._wfd, data)
            except OSError:
                pass
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)    # the group this Page started
                except OSError:
                    pass
                proc.wait(timeout=5)
            for fd in (self._wfd, self._rfd):
                try:
                    os.close(fd)
                except OSError:
                    pass
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None
        if self.profile:
            shutil.rmtree(self.profile, ignore_errors=True)
            self.profile = None

    # --- what a test does -------------------------------------------------

    def navigate(self, url):
        mark = len(self._events)
        result = self.call("Page.navigate", {"url": url})
        if result.get("errorText"):
            raise ChromiumError(f"cannot open {url}: {result['errorText']}")
        self.wait_event("Page.loadEventFired", since=mark)

    def eval(self, expression):
        """The value of a JavaScript expression (promises awaited)."""
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True})
        if "exceptionDetails" in result:
            d = result["exceptionDetails"]
            text = d.get("exception", {}).get("description") or d.get("text", "exception")
            raise ChromiumError(f"JavaScript error in {expression[:80]!r}: {text}")
        return result.get("result", {}).get("value")

    def centre(self, selector):
        """The viewport position of an element's centre, scrolled into view."""
        pos = self.eval(
            "(function(){var e=document.querySelector(%s); if(!e) return null;"
            "e.scrollIntoView({block:'center',inline:'center'});"
            "var r=e.getBoundingClientRect(); return [r.left+r.width/2, r.top+r.height/2,"
            " r.width, r.height];})()" % json.dumps(selector))
        if pos is None:
            raise ChromiumError(f"no element matches {selector!r}")
        if pos[2] <= 0 or pos[3] <= 0:
            raise ChromiumError(f"{selector!r} is not displayed (its box is empty)")
        return pos[0], pos[1]

    def move(self, x, y):
        self.call("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y})

    def hover(self, selector, dx=0.0, dy=0.0):
        x, y = self.centre(selector)
        self.move(x + dx, y + dy)
        return x + dx, y + dy

    def click(self, selector):
        """A real left click (move, press, release) at the element's centre."""
        x, y = self.centre(selector)
        self.move(x, y)
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y,
                                                   "button": "left", "buttons": 1,
                                                   "clickCount": 1})
        return x, y

    def screenshot(self, path=None, full_page=False):
        """A PNG of the viewport (or the whole page), as bytes; also written to path."""
        params = {"format": "png"}
        if full_page:
            size = self.eval("[document.documentElement.scrollWidth,"
                             " document.documentElement.scrollHeight]")
            params.update(captureBeyondViewport=True,
                          clip={"x": 0, "y": 0, "width": size[0], "height": size[1], "scale": 1})
        else:
            self.eval("window.scrollTo(0, 0)")
        png = base64.b64decode(self.call("Page.captureScreenshot", params)["data"])
        if path:
            pathlib.Path(path).write_bytes(png)
        return png

    def requests_outside(self):
        """URLs the page requested that are not file:, data:, blob: or about:."""
        # let the events that are already on their way arrive
        deadline = time.monotonic() + 0.2
        try:
            while True:
                self._pump(deadline, "events")
        except ChromiumError:
            pass
        return list(self._outside)


# --------------------------------------------------------------------------
# PNG

def decode_png(data):
    """(width, height, channels, rows): 8-bit RGB/RGBA, non-interlaced."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, header = 8, [], None
    while pos + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if len(body) != length:
            raise ValueError("truncated PNG chunk")
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
    if header is None:
        raise ValueError("PNG without IHDR")
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or colour not in (2, 6) or interlace:
        raise ValueError(f"unsupported PNG: bit depth {depth}, colour type {colour}, "
                         f"interlace {interlace} (8-bit RGB/RGBA, not interlaced)")
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(b"".join(idat))
    stride = width * bpp
    if len(raw) < height * (stride + 1):
        raise ValueError("PNG image data is short")
    rows, prev = [], bytes(stride)
    for y in range(height):
        start = y * (stride + 1)
        ftype, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        if ftype == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 255
        elif ftype == 2:
            line = bytearray((a + b) & 255 for a, b in zip(line, prev))
        elif ftype == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 255
        elif ftype == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b = prev[i]
                c = prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else b if pb <= pc else c
                line[i] = (line[i] + pred) & 255
        elif ftype != 0:
            raise ValueError(f"PNG row {y}: unknown filter type {ftype}")
        line = bytes(line)
        rows.append(line)
        prev = line
    return width, height, bpp, rows


def png_stats(data):
    """Size, the background colour (the commonest), the fraction of other
    pixels and the number of distinct colours (alpha ignored)."""
    width, height, bpp, rows = decode_png(data)
    counts = collections.Counter()
    for line in rows:
        for i in range(0, len(line), bpp):
            counts[line[i:i + 3]] += 1
    background, n = counts.most_common(1)[0]
    total = width * height
    return {"width": width, "height": height, "background": tuple(background),
            "foreground": 1 - n / total if total else 0.0, "colours": len(counts)}


def not_blank(data, min_foreground=0.01, min_colours=4):
    """True when a PNG is a picture: at least min_foreground of its pixels
    unlike the background and min_colours distinct colours."""
    s = png_stats(data)
    return s["foreground"] >= min_foreground and s["colours"] >= min_colours


# --------------------------------------------------------------------------

def main(argv=None):
    ap = argparse.ArgumentParser(description="Open a local HTML page in headless Chromium "
                                             "(offline) and check it.")
    ap.add_argument("page")
    ap.add_argument("--width", type=int, default=1000)
    ap.add_argument("--height", type=int, default=700)
    ap.add_argument("--screenshot", metavar="OUT.png")
    ap.add_argument("--full-page", action="store_true", help="screenshot the whole page")
    ap.add_argument("--click", action="append", default=[], metavar="SELECTOR")
    ap.add_argument("--eval", action="append", default=[], metavar="JS")
    ap.add_argument("--timeout", type=float, default=30.0)
    args = ap.parse_args(argv)
    if not find_chromium():
        print("skipped: chromium is not installed", file=sys.stderr)
        return SKIP
    failed = False
    try:
        with Page(args.page, args.width, args.height, args.timeout) as p:
            for sel in args.click:
                p.click(sel)
            for js in args.eval:
                print(json.dumps(p.eval(js)))
            png = p.screenshot(args.screenshot, full_page=args.full_page)
            stats = png_stats(png)
            print(f"screenshot {stats['width']}x{stats['height']}: "
                  f"{stats['foreground']:.1%} not background, {stats['colours']} colours"
                  + (f", written to {args.screenshot}" if args.screenshot else ""))
            if not not_blank(png):
                print("error: the page looks blank", file=sys.stderr)
                failed = True
            for url in p.requests_outside():
                print(f"error: the page requested {url}", file=sys.stderr)
                failed = True
    except (ChromiumError, ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
