"""Where the daemon's operations endpoints listen, the rule that keeps them on loopback, and the
names a request may give in its Host header.

The endpoints have no login: the status page names sources, keys and counts, and /metrics tells how
the feed is doing. So an address that is not loopback is refused unless the operator says so. And a
web page the operator visits could read them through a name it rebinds to 127.0.0.1 (DNS
rebinding): the browser then sends that name as Host, so only known names are answered.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

from ..loopback import is_loopback


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


def allowed_hosts(bound: HttpAddress, configured: Iterable[str] = ()) -> frozenset[str]:
    """The names the endpoints answer to: the bound host, `localhost` and the operator's list."""
    return frozenset(_name(h) for h in (bound.host, "localhost", *configured))


def host_allowed(header: str | None, allowed: frozenset[str]) -> bool:
    """Whether a Host header (`name`, `name:port`, `[v6]:port`) names this server. An IP address is
    always accepted: a page can make a browser send one only when the page itself is at that
    address, so it cannot rebind (and probes and scrapers by pod IP keep working)."""
    if not header:
        return False
    text = header.strip()
    host = text[1:text.find("]")] if text.startswith("[") else text.rpartition(":")[0] if ":" in text else text
    name = _name(host)
    if name in allowed:
        return True
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _name(host: str) -> str:
    return host.strip().strip("[]").lower().removesuffix(".")
