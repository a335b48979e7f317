"""A minimal Chrome DevTools Protocol client (stdlib only) for the browser tests: headless Chromium
with a debugging port, one page, ``evaluate(js)``; enough to click the web UI's buttons.

The WebSocket part is the RFC 6455 subset CDP needs: text frames, masked from the client, unmasked
(and possibly fragmented) from the browser.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import struct
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any


class WebSocket:
    def __init__(self, url: str, timeout: float = 20.0) -> None:
        parts = urllib.parse.urlparse(url)
        self.sock = socket.create_connection((parts.hostname, parts.port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET {parts.path} HTTP/1.1\r\nHost: {parts.hostname}:{parts.port}\r\n"
                           f"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                           "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        head = b""
        while not head.endswith(b"\r\n\r\n"):
            byte = self.sock.recv(1)
            if not byte:
                raise ConnectionError("the browser closed the DevTools connection during the handshake")
            head += byte
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise ConnectionError(f"DevTools handshake refused: {head[:200]!r}")

    def _exactly(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("the browser closed the DevTools connection")
            data += chunk
        return data

    def send(self, text: str) -> None:
        payload, mask = text.encode(), os.urandom(4)
        n = len(payload)
        head = bytes([0x81]) + (bytes([0x80 | n]) if n < 126 else
                                bytes([0x80 | 126]) + struct.pack("!H", n) if n < 65536 else
                                bytes([0x80 | 127]) + struct.pack("!Q", n))
        self.sock.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def recv(self) -> str:
        message = b""
        while True:
            first, second = self._exactly(2)
            n = second & 0x7F
            if n == 126:
                n = struct.unpack("!H", self._exactly(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", self._exactly(8))[0]
            payload = self._exactly(n)
            if first & 0x0F in (0x8, 0x9, 0xA):     # close, ping, pong: none matters here
                continue
            message += payload
            if first & 0x80:
                return message.decode("utf-8", "replace")

    def close(self) -> None:
        self.sock.close()


class Browser:
    """Headless Chromium on a debugging port with one page; ``evaluate`` runs JavaScript in it."""

    def __init__(self, chromium: str, profile_dir: Path, port: int) -> None:
        self.proc = subprocess.Popen([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                                      "--disable-dev-shm-usage", "--no-first-run",
                                      f"--remote-debugging-port={port}", f"--user-data-dir={profile_dir}",
                                      "--window-size=1400,900", "about:blank"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=2) as resp:
                    pages = [t for t in json.loads(resp.read()) if t.get("type") == "page"]
                if pages:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.quit()
                raise AssertionError("headless Chromium opened no DevTools page in 30 s")
            time.sleep(0.3)
        self.ws = WebSocket(pages[0]["webSocketDebuggerUrl"])
        self._id = 0

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._id += 1
        self.ws.send(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == self._id:
                if "error" in message:
                    raise AssertionError(f"{method}: {message['error']}")
                return message.get("result") or {}

    def goto(self, url: str) -> None:
        self.call("Page.navigate", url=url)

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return (result.get("result") or {}).get("value")

    def click_button(self, text: str) -> bool:
        """Click the first visible button whose text is ``text``; False when there is none (yet)."""
        return bool(self.evaluate(
            "(() => { const b = [...document.querySelectorAll('button')]"
            ".find(b => b.offsetParent !== null && "
            f"b.textContent.trim() === {json.dumps(text)}); if (b) b.click(); return !!b; }})()"))

    def quit(self) -> None:
        ws = getattr(self, "ws", None)
        if ws is not None:
            ws.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
