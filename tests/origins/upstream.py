"""Upstreams on two loopback addresses, which are two origins (127.0.0.1 and 127.0.0.2): each answers
its paths from a table and records every request as text (path, headers, a Basic credential
decoded), so a test can ask whether a secret ever reached it."""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

Answer = tuple[int, dict[str, str], Any]  # status, headers, JSON body (None: no body)


@dataclass
class Upstream:
    host: str
    tls: ssl.SSLContext | None = None
    routes: dict[str, Answer | Callable[[str], Answer]] = field(default_factory=dict)
    seen: list[str] = field(default_factory=list)  # every request as text

    def __post_init__(self) -> None:
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer((self.host, 0), _handler(self))
        if self.tls is not None:
            self.server.socket = self.tls.wrap_socket(self.server.socket, server_side=True)
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    @property
    def base(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.server.server_address[1]}"

    def reset(self) -> None:
        with self.lock:
            self.routes.clear()
            self.seen.clear()

    def route(self, path: str, answer: Answer | Callable[[str], Answer]) -> None:
        self.routes[path] = answer

    def got(self, secret: str) -> bool:
        with self.lock:
            return any(secret in text for text in self.seen)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def redirect(code: int, location: str) -> Answer:
    return code, {"Location": location}, None


def items(ids: list[int], *, next_link: str | None = None, link_header: str | None = None) -> Answer:
    headers = {"Link": f'<{link_header}>; rel="next"'} if link_header else {}
    return 200, headers, {"items": [{"id": i, "email": f"p{i}@example.org"} for i in ids], "next": next_link}


def _handler(upstream: Upstream) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            self._answer()

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self._answer()

        def _answer(self) -> None:
            text = f"{self.command} {self.path}\n{self.headers}"
            auth = self.headers.get("Authorization", "")
            if auth.startswith("Basic "):
                text += "\nbasic: " + base64.b64decode(auth[6:]).decode(errors="replace")
            with upstream.lock:
                upstream.seen.append(text)
                answer = upstream.routes.get(self.path.split("?")[0], (404, {}, {"error": "no such path"}))
            status, headers, body = answer(self.path) if callable(answer) else answer
            raw = b"" if body is None else json.dumps(body).encode()
            self.send_response(status)
            for name, value in {"Content-Type": "application/json", **headers}.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    return Handler


def self_signed(folder: Path) -> tuple[Path, ssl.SSLContext]:
    """A certificate for 127.0.0.1 (the file a client trusts through SSL_CERT_FILE) and a server context."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "2",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return cert, context
