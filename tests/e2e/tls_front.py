"""``TLSFront``: an HTTPS listener in front of a gateway, for the console tools' TLS options.

TLS ends here, with a certificate of a test CA (trustme), and each request goes on to the
gateway over plain HTTP, headers and body as they came, ``Authorization`` included. With
``client_ca`` it is mutual TLS: a client without a certificate that CA signed gets no
connection. A thread of the test process serves it on a free loopback port.
"""

from __future__ import annotations

import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import trustme

_HOP_BY_HOP = frozenset({"host", "connection", "content-length", "transfer-encoding", "keep-alive"})


class TLSFront:
    def __init__(self, upstream: str, ca: trustme.CA, *, client_ca: trustme.CA | None = None) -> None:
        self.upstream = upstream
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ca.issue_cert("127.0.0.1").configure_cert(self.context)
        if client_ca is not None:
            self.context.verify_mode = ssl.CERT_REQUIRED
            client_ca.configure_trust(self.context)
        self.authorizations: list[str] = []  # the Authorization header of each request, in order
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.url = ""

    def start(self) -> TLSFront:
        front = self

        class Forward(BaseHTTPRequestHandler):
            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
                front.authorizations.append(self.headers.get("Authorization", ""))
                answer = httpx.request(
                    self.command, front.upstream + self.path, headers=headers, content=body, timeout=30
                )
                self.send_response(answer.status_code)
                for name, value in answer.headers.items():
                    if name.lower() not in _HOP_BY_HOP:
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _forward

            def log_message(self, format: str, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Forward)
        server.socket = self.context.wrap_socket(server.socket, server_side=True)
        self._server = server
        self.url = f"https://127.0.0.1:{server.server_address[1]}"
        self._thread = threading.Thread(target=server.serve_forever, name="tls-front", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
