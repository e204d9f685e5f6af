"""The names a request to the daemon's operations endpoints may give in its Host header (where they
listen, and the rule that keeps them on loopback, are `connector.loopback`'s HttpAddress).

The endpoints have no login: the status page names sources, keys and counts, and /metrics tells how
the feed is doing. So an address that is not loopback is refused unless the operator says so. And a
web page the operator visits could read them through a name it rebinds to 127.0.0.1 (DNS
rebinding): the browser then sends that name as Host, so only known names are answered.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from ..loopback import HttpAddress


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
    host = text[1 : text.find("]")] if text.startswith("[") else text.rpartition(":")[0] if ":" in text else text
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
