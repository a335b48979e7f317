"""The hostile server's process: ``python -m tests.hostile.serve MODULE:HANDLER --stats FILE``.

Prints ``listening http(s)://127.0.0.1:PORT`` once bound, then serves until SIGTERM. See
:mod:`tests.hostile.harness` for the handler contract.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import signal
import ssl
import subprocess
import sys
import traceback
from pathlib import Path

from tests.hostile.harness import Conn


class Counts:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.data = {"requests": 0, "connections": 0}
        self.write()

    def request(self) -> None:
        self.data["requests"] += 1
        self.write()

    def connection(self) -> None:
        self.data["connections"] += 1
        self.write()

    def write(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data))
        os.replace(tmp, self.path)


def tls_context(directory: Path) -> ssl.SSLContext:
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
                    "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                   check=True, capture_output=True)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    return ctx


async def main(args: argparse.Namespace) -> None:
    module_name, _, func_name = args.spec.partition(":")
    handler = getattr(importlib.import_module(module_name), func_name)
    param = json.loads(args.param)
    counts = Counts(Path(args.stats))

    async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        counts.connection()
        conn = Conn(reader, writer, param, counts)
        try:
            while not conn.closed:
                request = await conn.read_request()
                if request is None:
                    break
                await handler(conn, request)
        except (ConnectionError, asyncio.CancelledError):
            pass
        except Exception:  # noqa: BLE001 - a handler's bug closes its connection, it is not the client's
            traceback.print_exc(file=sys.stderr)
        finally:
            writer.close()

    ssl_ctx = tls_context(Path(args.tls_dir)) if args.tls_dir else None
    server = await asyncio.start_server(on_connection, "127.0.0.1", 0, ssl=ssl_ctx, limit=1 << 20)
    port = server.sockets[0].getsockname()[1]
    print(f"listening {'https' if ssl_ctx else 'http'}://127.0.0.1:{port}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    async with server:
        await stop.wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("spec")
    parser.add_argument("--stats", required=True)
    parser.add_argument("--param", default="null")
    parser.add_argument("--tls-dir", default="")
    asyncio.run(main(parser.parse_args()))
