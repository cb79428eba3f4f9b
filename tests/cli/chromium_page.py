#!/usr/bin/python3
"""Loads a local HTML file in real headless Chromium and reports what a person would see.

Drives Chromium through the DevTools protocol over --remote-debugging-pipe (file descriptors
3 and 4, NUL-terminated JSON messages: chromium/src content/browser/devtools/
devtools_pipe_handler.cc), so no extra package (websocket client, chromedriver) is needed.

  chromium_page.py PAGE.html --checks JS_EXPRESSION [--screenshot OUT.png]
                   [--width W] [--height H] [--timeout S] [--count-color #rrggbb]...

Prints one JSON object on stdout:
  console_errors   console.error/assert calls, uncaught exceptions, error log entries
  requests         every URL the page asked for (a self-contained page asks only file:/data:)
  checks           the value of JS_EXPRESSION evaluated once the page has loaded
                   (awaited when it is a promise)
  screenshot       {width, height, distinct_colors, non_white, color_pixels} of the region
                   checks.clip ({x, y, width, height} in CSS pixels; else the viewport), captured
                   as PNG and decoded here with zlib (PNG row filters undone); color_pixels
                   counts the pixels near each --count-color
  A JavaScript dialog (alert) is dismissed and reported in console_errors.
Exit status: 0 when the page loaded and was inspected, 3 on a protocol or time-out failure.
"""
import argparse
import base64
import fcntl
import json
import os
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import zlib

CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-extensions", "--disable-default-apps", "--mute-audio", "--hide-scrollbars",
    "--remote-debugging-pipe",
]


def high_fd(fd):
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return moved


class Browser:
    """One Chromium process and the DevTools session of one page."""

    def __init__(self, chromium, deadline):
        self.deadline = deadline
        self.profile = tempfile.mkdtemp(prefix="genscope-chromium-")
        # The child's ends are moved above 10 first, so that dup2() onto 3 and 4 in the child
        # never overwrites one of them (and always clears close-on-exec).
        to_child_r, self.to_child = (high_fd(fd) for fd in os.pipe())
        self.from_child, from_child_w = (high_fd(fd) for fd in os.pipe())

        def child_fds():
            os.dup2(to_child_r, 3)
            os.dup2(from_child_w, 4)

        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [chromium] + CHROMIUM_FLAGS + ["--user-data-dir=" + self.profile, "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.stderr,
            preexec_fn=child_fds, close_fds=False, start_new_session=True)
        os.close(to_child_r)
        os.close(from_child_w)
        self.buffer = b""
        self.next_id = 0
        self.events = []
        self.session = None

    def close(self):
        try:
            self.send("Browser.close", session=False, wait=False)
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        # Chromium's helper processes share the session it leads: end any that are left.
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        os.close(self.to_child)
        os.close(self.from_child)
        shutil.rmtree(self.profile, ignore_errors=True)

    def chromium_stderr(self):
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace")[-4000:]

    def _read_message(self):
        while b"\0" not in self.buffer:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("Chromium did not answer in time")
            ready, _, _ = select.select([self.from_child], [], [], left)
            if not ready:
                continue
            chunk = os.read(self.from_child, 1 << 20)
            if not chunk:
                raise EOFError("Chromium closed the DevTools pipe")
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        message = json.loads(message)
        if message.get("method") == "Page.javascriptDialogOpening":
            # A dialog (alert() from injected script) would block the page: dismiss it, and
            # report it as an error.
            self.send("Page.handleJavaScriptDialog", {"accept": False}, wait=False)
        return message

    def send(self, method, params=None, session=True, wait=True):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session and self.session:
            message["sessionId"] = self.session
        os.write(self.to_child, json.dumps(message).encode() + b"\0")
        if not wait:
            return None
        while True:
            reply = self._read_message()
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError("%s failed: %s" % (method, reply["error"]))
                return reply.get("result", {})
            self.events.append(reply)

    def wait_event(self, method):
        for i, event in enumerate(self.events):
            if event.get("method") == method:
                return self.events.pop(i)
        while True:
            event = self._read_message()
            if event.get("method") == method:
                return event
            self.events.append(event)


def png_pixels(data):
    """Decodes an 8-bit RGB/RGBA PNG: (width, height, channels, rows of bytes)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and color in (2, 6), "unexpected PNG format"
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, previous = [], bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - channels] if x >= channels else 0
            b = previous[x]
            c = previous[x - channels] if x >= channels else 0
            if kind == 1:
                line[x] = (line[x] + a) & 255
            elif kind == 2:
                line[x] = (line[x] + b) & 255
            elif kind == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        previous = line
    return width, height, channels, rows


def pixel_summary(png, count_colors=()):
    width, height, channels, rows = png_pixels(png)
    colors, non_white = set(), 0
    targets = [(c, bytes.fromhex(c.lstrip("#"))) for c in count_colors]
    counts = {c: 0 for c in count_colors}
    for row in rows:
        for x in range(width):
            rgb = row[x * channels:x * channels + 3]
            colors.add(rgb)
            if rgb != b"\xff\xff\xff":
                non_white += 1
            for name, target in targets:
                if all(abs(rgb[i] - target[i]) <= 24 for i in range(3)):
                    counts[name] += 1
    return {"width": width, "height": height, "color_pixels": counts, "distinct_colors": len(colors), "non_white": non_white}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("page")
    parser.add_argument("--checks", default="null")
    parser.add_argument("--screenshot")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=900)
    parser.add_argument("--timeout", type=float, default=60)
    parser.add_argument("--count-color", action="append", default=[],
                        help="#rrggbb: count the region's pixels within 24 of this colour")
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    args = parser.parse_args()

    deadline = time.monotonic() + args.timeout
    browser = Browser(args.chromium, deadline)
    result = {"console_errors": [], "requests": []}
    try:
        target = browser.send("Target.createTarget", {"url": "about:blank"}, session=False)
        attached = browser.send("Target.attachToTarget",
                                {"targetId": target["targetId"], "flatten": True}, session=False)
        browser.session = attached["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            browser.send(domain + ".enable")
        browser.send("Emulation.setDeviceMetricsOverride",
                     {"width": args.width, "height": args.height, "deviceScaleFactor": 1,
                      "mobile": False})
        url = args.page if "://" in args.page else "file://" + os.path.abspath(args.page)
        browser.send("Page.navigate", {"url": url})
        browser.wait_event("Page.loadEventFired")
        checks = browser.send("Runtime.evaluate", {"expression": args.checks,
                                                   "awaitPromise": True,
                                                   "returnByValue": True})
        if "exceptionDetails" in checks:
            result["console_errors"].append("checks: " + json.dumps(checks["exceptionDetails"]))
        result["checks"] = checks.get("result", {}).get("value")
        if args.screenshot:
            shot = browser.send("Page.captureScreenshot", {"format": "png"})
            with open(args.screenshot, "wb") as f:
                f.write(base64.b64decode(shot["data"]))
        # The pixels that matter (e.g. a chart's canvas) are captured and decoded on their own:
        # decoding a whole page in pure Python would take seconds.
        clip = result["checks"].get("clip") if isinstance(result["checks"], dict) else None
        params = {"format": "png"}
        if clip:
            params["clip"] = dict(clip, scale=1)
        shot = browser.send("Page.captureScreenshot", params)
        result["screenshot"] = pixel_summary(base64.b64decode(shot["data"]), args.count_color)
        for event in browser.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                result["console_errors"].append(
                    "console." + params["type"] + ": " +
                    " ".join(str(a.get("value", a.get("description"))) for a in params["args"]))
            elif method == "Runtime.exceptionThrown":
                details = params["exceptionDetails"]
                result["console_errors"].append(
                    "exception: " + details.get("exception", {}).get("description",
                                                                     details.get("text", "")))
            elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
                result["console_errors"].append("log: " + params["entry"]["text"])
            elif method == "Page.javascriptDialogOpening":
                result["console_errors"].append("dialog: " + params.get("message", ""))
            elif method == "Network.requestWillBeSent":
                result["requests"].append(params["request"]["url"])
    except (TimeoutError, EOFError, RuntimeError, OSError) as e:
        print(json.dumps({"error": str(e), "chromium_stderr": browser.chromium_stderr()}))
        browser.close()
        return 3
    browser.close()
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
