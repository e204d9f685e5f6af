"""Whether a host is this machine: plain http, and the daemon's unauthenticated endpoints, are
allowed there only. A leaf module: the API client, the alert webhooks and the ops server share it."""

from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    """`localhost` or a loopback address (IPv6 with or without brackets); any other name may resolve
    anywhere, so it is not."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
