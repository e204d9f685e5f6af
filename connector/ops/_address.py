"""Where the daemon's operations endpoints listen, and the rule that keeps them on loopback.

The endpoints have no login: the status page names sources, keys and counts, and /metrics tells how
the feed is doing. So an address that is not loopback is refused unless the operator says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..loopback import is_loopback


@dataclass(frozen=True)
class HttpAddress:
    host: str
    port: int  # 0: any free port (the daemon logs the one it got)

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
    address = HttpAddress(host, int(port_text))
    if not public and not address.loopback:
        raise ValueError(
            f"{text!r} is not a loopback address, and /metrics and the status page have no login: "
            "serve them on 127.0.0.1 (behind a proxy you trust), or say so with [daemon] http_public = true "
            "or run --http-public"
        )
    return address
