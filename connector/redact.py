"""How a URL is shown anywhere: messages, logs (ours and httpx's), JSON outputs, the status page and
the ledger. One function, so no output can forget a part.

A URL may carry a credential in its userinfo (`https://TOKEN@host`, `postgresql://user:PW@host`), in
its query (`?api_key=...`, `?password=...`), its fragment, or, for a webhook, in its whole path. Only
scheme, host, port and path are shown; userinfo becomes `***`, every query value `***`, the fragment
goes. A string that does not parse as `scheme://authority...` (`postgresql//reader:PW@host/db`) is
never echoed, since what looks like its host or path may be the password.
"""

from __future__ import annotations

import re
from urllib.parse import quote, unquote

UNPARSEABLE = "<unparseable URL>"
HIDDEN = "***"

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")
# A registered name (possibly empty: sqlite:///file.db) or a bracketed IPv6 address, then digits.
_HOST_PORT = re.compile(r"(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._~%!$&'()*+,;=-]*)(?::(?P<port>\d{0,5}))?")
_PATH_SAFE = "/%:@!$&'()*+,;=-._~"
_NAME_SAFE = "%-._~[]"
# A URL inside free text runs to the next whitespace (a quote or bracket may be part of a raw token,
# so only the punctuation that closes or quotes it at its very end is left out).
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://(?:\S*[^\s.,;:!?)\]}'\"<>])?")
# `user:password@` without a `://` before it (a malformed URL quoted in a message).
_USERINFO_IN_TEXT = re.compile(r"[^\s'\"<>/@:]+:[^\s'\"<>/@]*@")

_secret_paths: set[str] = set()


def hide_path(url: str) -> None:
    """From now on show `url`'s path as `/***` wherever it appears: for a URL whose path is the
    credential (a Slack or Teams webhook). Matched after percent-decoding, so httpx's canonical form
    of the same URL is hidden too."""
    parts = _split(url)
    if parts is not None and parts[3] not in ("", "/"):
        _secret_paths.add(unquote(parts[3]))


def redact_url(url: object, *, query: bool = True) -> str:
    """`url` as scheme, host, port and path, userinfo and query values masked, no fragment;
    `query=False` leaves the query out. UNPARSEABLE for anything else."""
    parts = _split(str(url))
    if parts is None:
        return UNPARSEABLE
    scheme, userinfo, hostport, path, rest = parts
    shown = f"{scheme.lower()}://"
    if userinfo is not None:
        shown += f"{HIDDEN}:{HIDDEN}@" if ":" in userinfo else f"{HIDDEN}@"
    shown += hostport + _path(path)
    query_text = rest.partition("#")[0][1:] if rest.startswith("?") else ""
    if query and query_text:
        shown += "?" + "&".join(_pair(p) for p in query_text.split("&") if p)
    return shown.rstrip("?")


def redact_text(text: str) -> str:
    """Every URL inside free text redacted as by `redact_url`, and any `user:password@` outside
    a URL masked."""
    if "://" in text:
        text = _URL_IN_TEXT.sub(lambda m: redact_url(m.group()), text)
    if "@" in text:
        text = _USERINFO_IN_TEXT.sub(f"{HIDDEN}:{HIDDEN}@", text)
    return text


def _split(url: str) -> tuple[str, str | None, str, str, str] | None:
    """(scheme, userinfo or None, host[:port], path, "?query#fragment" rest), or None when it is no URL."""
    scheme, sep, rest = url.partition("://")
    if not sep or not _SCHEME.fullmatch(scheme):
        return None
    end = next((i for i, c in enumerate(rest) if c in "/?#"), len(rest))
    authority, tail = rest[:end], rest[end:]
    userinfo, at, hostport = authority.rpartition("@")
    if not _HOST_PORT.fullmatch(hostport):
        return None
    split = next((i for i, c in enumerate(tail) if c in "?#"), len(tail))
    return scheme, userinfo if at else None, hostport, tail[:split], tail[split:]


def _path(path: str) -> str:
    if path and unquote(path) in _secret_paths:
        return f"/{HIDDEN}"
    if "@" in path:  # `https://us/er:pw@host`: a user with a raw "/" spills into the path
        tail = path.rpartition("@")[2]
        path = f"/{HIDDEN}" + tail[tail.find("/") :] if "/" in tail else f"/{HIDDEN}"
    return quote(path, safe=_PATH_SAFE)


def _pair(pair: str) -> str:
    name, eq, _ = pair.partition("=")
    return f"{quote(name, safe=_NAME_SAFE)}={HIDDEN}" if eq else HIDDEN
