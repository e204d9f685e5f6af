"""The daemon's budget of open files, and the endpoint's part of it.

Each connection to the endpoint is an open file of the daemon's, like its ledger, source files and
API connections. The soft RLIMIT_NOFILE (often 1,024) is raised to the hard limit at start (systemd's
LimitNOFILE= sets that), and the endpoint's connection cap is kept to a quarter of it, so that no
number of clients can leave the daemon's own work without a file to open.
"""

from __future__ import annotations

import resource

ENDPOINT_SHARE = 4  # the endpoint may hold at most 1/ENDPOINT_SHARE of the open-file limit
UNLIMITED_TARGET = 65536  # a hard limit of "unlimited" cannot be set as a soft one on Linux


def raise_open_files_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard one; return the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, UNLIMITED_TARGET)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):  # refused (a container's own cap): the old limit stands
            pass
    return soft


def endpoint_connections(wanted: int) -> int:
    """The endpoint's connection cap within the open-file budget: `wanted`, or less when the limit is low."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(1, min(wanted, soft // ENDPOINT_SHARE))
