"""Whether a host is this machine: plain http, and the daemon's unauthenticated endpoints, are
allowed there only; and the address the daemon's operations endpoints listen on (`run --http`), held
to loopback by the same rule. A leaf module: the API client, the alert webhooks, the config and the
ops server share it."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass


def is_loopback(host: str) -> bool:
    """`localhost` or a loopback address (IPv6 with or without brackets); any other name may resolve
    anywhere, so it is not."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class HttpAddress:
    host: str
    port: int  # 0: any free port (the daemon logs the one it got)
    public: bool = False  # the operator allowed an address beyond loopback (--http-public, http_public)

    @property
    def loopback(self) -> bool:
        return is_loopback(self.host)

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_address(text: str, *, public: bool = False) -> HttpAddress:
    """`HOST:PORT` (`[::1]:9464` for IPv6); raises ValueError saying what is wrong. Without `public`,
    only a loopback host is accepted."""
    host, colon, port_text = text.strip().rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not colon or not host or not port_text.isdigit() or int(port_text) > 65535:
        raise ValueError(f"{text!r} is not HOST:PORT, e.g. 127.0.0.1:9464")
    address = HttpAddress(host, int(port_text), public)
    if not public and not address.loopback:
        raise ValueError(
            f"{text!r} is not a loopback address, and /metrics and the status page have no login: "
            "serve them on 127.0.0.1 (behind a proxy you trust), or say so with [daemon] http_public = true "
            "or run --http-public"
        )
    return address
