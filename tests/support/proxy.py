"""A loopback HTTP proxy that delays every request: a slow tracking server, made here.

A tracking server far from the cluster, or one under load, answers each request late.
`slow_proxy(target, delay_s)` listens on 127.0.0.1 and forwards each request to `target`
after sleeping `delay_s`, so a sweep pointed at the proxy's URI sees the real
`mlflow server` behind it, only slower. Bodies are read whole and sent on with their
length; only loopback traffic is made.
"""

from __future__ import annotations

import contextlib
import http.client
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


@dataclass
class SlowProxy:
    uri: str
    delay_s: float
    requests: int = 0
    paths: Counter[str] = field(default_factory=Counter)
    """'METHOD /path' (query left out) -> how many requests"""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def count(self, method: str = "", path: str = "") -> None:
        with self._lock:
            self.requests += 1
            self.paths[f"{method} {path.split('?')[0]}"] += 1


def _handler(target: str, proxy: SlowProxy) -> type[BaseHTTPRequestHandler]:
    parsed = urlparse(target)

    class Forward(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _forward(self) -> None:
            proxy.count(self.command, self.path)
            time.sleep(proxy.delay_s)
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
            upstream = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=120)
            try:
                upstream.request(self.command, self.path, body=body, headers=headers)
                response = upstream.getresponse()
                payload = response.read()
                self.send_response(response.status, response.reason)
                for name, value in response.getheaders():
                    if name.lower() not in HOP_BY_HOP:
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            finally:
                upstream.close()

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _forward

        def log_message(self, format: str, *args: object) -> None:
            pass  # the sweep's log is what the test reads

    return Forward


@contextlib.contextmanager
def slow_proxy(target: str, delay_s: float) -> Iterator[SlowProxy]:
    """A proxy on a free loopback port forwarding to `target` (http://127.0.0.1:PORT)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    proxy = SlowProxy(f"http://127.0.0.1:{server.server_address[1]}", delay_s)
    server.RequestHandlerClass = _handler(target, proxy)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        server.shutdown()
        server.server_close()
