"""Render an HTML file in headless Chromium and report what went wrong (console errors, exceptions, failed or
external requests, broken images), with a full-page screenshot.

Talks the Chrome DevTools Protocol over a minimal standard-library WebSocket client, so it needs nothing but a
Chromium binary (Debian: ``apt-get install chromium``; or set ``PRIVTEXT_CHROMIUM``). Chromium is started with
flags that keep it off the network (no background networking, component updates, sync or QUIC) and a fresh
profile folder that is removed afterwards.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import secrets
import shutil
import socket
import struct
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import BackendError

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--disable-extensions", "--hide-scrollbars", "--mute-audio")


def find_chromium() -> str | None:
    """The Chromium (or Chrome) executable to render with: ``$PRIVTEXT_CHROMIUM`` when it exists, else the first of
    /usr/bin/chromium, chromium, chromium-browser, google-chrome, google-chrome-stable on the PATH; ``None`` when
    there is none."""
    env = os.environ.get("PRIVTEXT_CHROMIUM")
    if env and Path(env).exists():
        return env
    for name in ("/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        p = shutil.which(name) if not name.startswith("/") else (name if Path(name).exists() else None)
        if p:
            return p
    return None


@dataclass
class RenderResult:
    """What rendering a page showed: its title, console errors and warnings, uncaught exceptions, log errors,
    failed requests, external requests (any URL but data:, file:, about: and blob:), image counts, the page's size
    in CSS pixels, and the screenshot's path when one was taken."""

    url: str
    title: str = ""
    console_errors: list[str] = field(default_factory=list)
    console_warnings: list[str] = field(default_factory=list)
    exceptions: list[str] = field(default_factory=list)
    log_errors: list[str] = field(default_factory=list)
    failed_requests: list[str] = field(default_factory=list)
    external_requests: list[str] = field(default_factory=list)
    images: int = 0
    broken_images: int = 0
    page_height: int = 0
    page_width: int = 0  # the document's scroll width: larger than the viewport means horizontal overflow
    screenshot: Path | None = None

    @property
    def errors(self) -> list[str]:
        """Every problem as one line each: console errors, exceptions, log errors, failed requests, external
        requests and broken images (warnings are not problems)."""
        return [*self.console_errors, *self.exceptions, *self.log_errors, *self.failed_requests,
                *(f"external request: {u}" for u in self.external_requests),
                *([f"{self.broken_images} broken image(s)"] if self.broken_images else [])]

    @property
    def ok(self) -> bool:
        """Whether the page rendered without any problem in :attr:`errors`."""
        return not self.errors


class _WebSocket:
    """Just enough RFC 6455 for CDP: client handshake, masked text frames out, (fragmented) frames in."""

    def __init__(self, url: str, *, timeout: float):
        assert url.startswith("ws://"), url
        hostport, _, path = url[5:].partition("/")
        host, _, port = hostport.partition(":")
        self.sock = socket.create_connection((host, int(port or 80)), timeout=timeout)
        key = base64.b64encode(secrets.token_bytes(16)).decode()
        req = (f"GET /{path} HTTP/1.1\r\nHost: {hostport}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n")
        self.sock.sendall(req.encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise BackendError("chromium closed the DevTools connection during the handshake")
            head += chunk
        status = head.split(b"\r\n", 1)[0]
        if b" 101 " not in status:
            raise BackendError(f"DevTools WebSocket handshake failed: {status.decode(errors='replace')}")
        self._buf = head.split(b"\r\n\r\n", 1)[1]

    def _recv_exact(self, n: int) -> bytes:
        while len(self._buf) < n:
            chunk = self.sock.recv(max(65536, n - len(self._buf)))
            if not chunk:
                raise BackendError("chromium closed the DevTools connection")
            self._buf += chunk
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def send(self, text: str) -> None:
        """Send ``text`` as one masked text frame (the client side of RFC 6455)."""
        data = text.encode("utf-8")
        head = bytearray([0x81])
        n = len(data)
        if n < 126:
            head.append(0x80 | n)
        elif n < 1 << 16:
            head.append(0x80 | 126)
            head += struct.pack(">H", n)
        else:
            head.append(0x80 | 127)
            head += struct.pack(">Q", n)
        mask = secrets.token_bytes(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
        self.sock.sendall(bytes(head) + mask + masked)

    def recv(self) -> str:
        """The next text or binary message (fragments joined), pings skipped; raises
        :class:`~privtext.errors.BackendError` when Chromium closes the connection."""
        parts: list[bytes] = []
        while True:
            b1, b2 = self._recv_exact(2)
            fin, opcode = b1 & 0x80, b1 & 0x0F
            n = b2 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._recv_exact(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._recv_exact(8))[0]
            mask = self._recv_exact(4) if b2 & 0x80 else b""
            payload = self._recv_exact(n)
            if mask:
                payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            if opcode == 0x8:
                raise BackendError("chromium closed the DevTools connection")
            if opcode == 0x9:  # ping -> pong is optional for a short session; ignore
                continue
            if opcode in (0x1, 0x2, 0x0):
                parts.append(payload)
                if fin:
                    return b"".join(parts).decode("utf-8")

    def close(self) -> None:
        """Close the socket (errors ignored)."""
        with contextlib.suppress(OSError):
            self.sock.close()


class _CDP:
    def __init__(self, ws: _WebSocket, *, timeout: float):
        self.ws, self.timeout, self._id = ws, timeout, 0
        self.events: list[dict[str, Any]] = []

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """Call DevTools method ``method`` and return its result, keeping the events that arrive meanwhile; raises
        :class:`~privtext.errors.BackendError` on an error reply or after the timeout."""
        self._id += 1
        mid = self._id
        self.ws.send(json.dumps({"id": mid, "method": method, "params": params}))
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == mid:
                if "error" in msg:
                    raise BackendError(f"CDP {method} failed: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)
        raise BackendError(f"CDP {method} timed out after {self.timeout}s")

    def wait_event(self, method: str) -> dict[str, Any]:
        """The first event ``method`` received (kept or still to come); raises
        :class:`~privtext.errors.BackendError` after the timeout."""
        for e in self.events:
            if e.get("method") == method:
                return e
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            msg = json.loads(self.ws.recv())
            if "method" in msg:
                self.events.append(msg)
                if msg["method"] == method:
                    return msg
        raise BackendError(f"timed out waiting for {method}")

    def drain(self, seconds: float) -> None:
        """Collect the events that arrive during the next ``seconds`` (the page settling)."""
        self.ws.sock.settimeout(seconds)
        end = time.monotonic() + seconds
        with contextlib.suppress(TimeoutError, socket.timeout):
            while time.monotonic() < end:
                msg = json.loads(self.ws.recv())
                if "method" in msg:
                    self.events.append(msg)
        self.ws.sock.settimeout(self.timeout)


def _devtools_port(profile: Path, proc: subprocess.Popen[bytes], timeout: float) -> int:
    f = profile / "DevToolsActivePort"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            err = proc.stderr.read().decode(errors="replace")[-2000:] if proc.stderr else ""
            raise BackendError(f"chromium exited with code {proc.returncode}: {err}")
        if f.exists():
            lines = f.read_text().splitlines()
            if lines and lines[0].strip().isdigit():
                return int(lines[0])
        time.sleep(0.05)
    raise BackendError(f"chromium did not open its DevTools port within {timeout}s")


def _json_list(port: int, timeout: float) -> list[dict[str, Any]]:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(f"http://127.0.0.1:{port}/json/list", timeout=timeout) as r:
        return json.loads(r.read().decode())  # type: ignore[no-any-return]


def _console_text(params: dict[str, Any]) -> str:
    args = params.get("args") or []
    vals = [str(a.get("value", a.get("description", ""))) for a in args]
    return " ".join(vals) or str(params.get("type"))


def render(
    html_path: str | os.PathLike[str],
    *,
    screenshot: str | os.PathLike[str] | None = None,
    width: int = 1200,
    height: int = 900,
    timeout: float = 60.0,
    settle: float = 0.5,
    chromium: str | None = None,
) -> RenderResult:
    """Open ``html_path`` in headless Chromium, collect problems, optionally save a full-page PNG screenshot."""
    exe = chromium or find_chromium()
    if exe is None:
        raise BackendError("no Chromium found: install it (Debian: apt-get install chromium) or set PRIVTEXT_CHROMIUM")
    page = Path(html_path).resolve()
    if not page.exists():
        raise BackendError(f"{page}: no such file to render")
    url = page.as_uri()
    profile = Path(tempfile.mkdtemp(prefix="privtext-chromium-"))
    cmd = [exe, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-port=0", "--remote-allow-origins=*",
           f"--window-size={width},{height}", "about:blank"]
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    ws = None
    try:
        port = _devtools_port(profile, proc, timeout)
        deadline = time.monotonic() + timeout
        target = None
        while target is None and time.monotonic() < deadline:
            target = next((t for t in _json_list(port, timeout) if t.get("type") == "page"), None)
            if target is None:
                time.sleep(0.1)
        if target is None:
            raise BackendError("chromium opened no page target")
        ws = _WebSocket(target["webSocketDebuggerUrl"], timeout=timeout)
        cdp = _CDP(ws, timeout=timeout)
        for m in ("Runtime.enable", "Log.enable", "Page.enable", "Network.enable"):
            cdp.call(m)
        cdp.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                 mobile=width < 700)
        cdp.call("Page.navigate", url=url)
        cdp.wait_event("Page.loadEventFired")
        cdp.drain(settle)
        res = RenderResult(url=url)
        info = cdp.call("Runtime.evaluate", returnByValue=True, expression=(
            "JSON.stringify({title: document.title, images: document.images.length, "
            "broken: Array.from(document.images).filter(i => !i.complete || i.naturalWidth === 0).length, "
            "height: Math.ceil(document.documentElement.scrollHeight), "
            "width: Math.ceil(document.documentElement.scrollWidth)})"))
        vals = json.loads(info.get("result", {}).get("value") or "{}")
        res.title, res.images, res.broken_images = vals.get("title", ""), vals.get("images", 0), vals.get("broken", 0)
        res.page_height = int(vals.get("height", 0))
        res.page_width = int(vals.get("width", 0))
        if screenshot is not None:
            h = max(height, min(res.page_height, 16000))
            cdp.call("Emulation.setDeviceMetricsOverride", width=width, height=h, deviceScaleFactor=1,
                     mobile=width < 700)
            shot = cdp.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
            out = Path(screenshot)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(base64.b64decode(shot["data"]))
            res.screenshot = out
        cdp.drain(0.1)
        for e in cdp.events:
            m, p = str(e.get("method")), e.get("params", {})
            if m == "Runtime.consoleAPICalled":
                if p.get("type") in ("error", "assert"):
                    res.console_errors.append(_console_text(p))
                elif p.get("type") == "warning":
                    res.console_warnings.append(_console_text(p))
            elif m == "Runtime.exceptionThrown":
                d = p.get("exceptionDetails", {})
                res.exceptions.append(str(d.get("exception", {}).get("description") or d.get("text")))
            elif m == "Log.entryAdded":
                entry = p.get("entry", {})
                if entry.get("level") == "error":
                    res.log_errors.append(f"{entry.get('source')}: {entry.get('text')} {entry.get('url', '')}".strip())
            elif m == "Network.requestWillBeSent":
                u = p.get("request", {}).get("url", "")
                if not u.startswith(("data:", "file:", "about:", "blob:")):
                    res.external_requests.append(u)
            elif m == "Network.loadingFailed":
                res.failed_requests.append(f"request failed: {p.get('errorText')}")
        with contextlib.suppress(BackendError, OSError):
            ws.send(json.dumps({"id": 10_000, "method": "Browser.close"}))
        return res
    finally:
        if ws is not None:
            ws.close()
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        if proc.stderr is not None:
            proc.stderr.close()
        shutil.rmtree(profile, ignore_errors=True)


__all__ = ["RenderResult", "find_chromium", "render"]
