"""Two upstreams, on 127.0.0.1 (`home`, the configured origin) and 127.0.0.2 (`away`, another one),
emptied before each test; and `tls_home`, an https upstream on 127.0.0.1 trusted through SSL_CERT_FILE."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .upstream import Upstream, self_signed


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[Upstream, Upstream]]:
    pair = Upstream("127.0.0.1"), Upstream("127.0.0.2")
    yield pair
    for server in pair:
        server.close()


@pytest.fixture
def home(servers: tuple[Upstream, Upstream]) -> Upstream:
    servers[0].reset()
    return servers[0]


@pytest.fixture
def away(servers: tuple[Upstream, Upstream]) -> Upstream:
    servers[1].reset()
    return servers[1]


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Upstream]]:
    cert, context = self_signed(tmp_path_factory.mktemp("tls"))
    server = Upstream("127.0.0.1", tls=context)
    yield cert, server
    server.close()


@pytest.fixture
def tls_home(tls_server: tuple[Path, Upstream], monkeypatch: pytest.MonkeyPatch) -> Upstream:
    cert, server = tls_server
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    server.reset()
    return server
