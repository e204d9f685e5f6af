"""Logging: structlog over the stdlib, so our events and every library's pass one redaction chain.

The API secret is masked everywhere, and every URL is shown as `connector.redact` renders it
(httpx's own "HTTP Request: POST <url>" lines included, by a filter on its loggers). Contact PII is
masked in every event below DEBUG: a debug session may see it, production logs at INFO never do.
Emails and phone numbers are found anywhere in the text; a name cannot be told from other words, so
it is masked by its key (`name`, `first_name`, `last_name`, at any depth: a person or a record
logged whole).
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Callable, Mapping
from typing import Any, TextIO

import structlog
from structlog.typing import EventDict, Processor

from .redact import redact_text

MASK = "**********"
_secrets: set[str] = set()

_EMAIL = re.compile(r"[\w.+%-]+@[\w-]+(?:\.[\w-]+)*", re.UNICODE)
_PHONE = re.compile(r"(?<![\w-])\+?\d[\d ().-]{5,}\d(?![\w-])")
_PII_KEYS = {"email", "phone", "name", "first_name", "last_name"}


def register_secret(value: str | None) -> None:
    """Mask `value` in every log event from now on (short values would mask too much)."""
    if value and len(value) >= 6:
        _secrets.add(value)


def _scrub(value: Any, fn: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return fn(value)
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, dict):
        return {k: _scrub(v, fn) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_scrub(v, fn) for v in value)
    if isinstance(value, BaseException):
        return fn(str(value))
    # Any other object (headers, a request, a client) would be rendered through its repr later,
    # past the masks: render it now so the masks see the text.
    return fn(repr(value))


def _scrub_event(event: Mapping[str, Any], fn: Callable[[str], str]) -> dict[str, Any]:
    """Scrub every field but structlog's private ones (`_record`, which the formatter still needs)."""
    return {k: v if k.startswith("_") else _scrub(v, fn) for k, v in event.items()}


# C0 but tab and newline, DEL and C1: what a terminal obeys (ESC starts colours, titles, cursor moves;
# C1 0x9b is a one-byte CSI to some terminals) rather than shows.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def inert(text: str) -> str:
    """Every control character a terminal would obey written out as `\\u001b`, so that a value from
    outside (an API's client name or error, a source's data) prints as text and changes nothing. The
    escape is JSON's own: inside a JSON string the value read back is unchanged."""
    return _CONTROL.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def inert_values(_logger: Any, _method: str, event: EventDict) -> EventDict:
    """For the console renderer, which writes strings as they are (JSON lines escape them already)."""
    return _scrub_event(event, inert)


def mask_secrets(text: str) -> str:
    """`text` with every URL in it redacted and every registered secret masked: what any output
    that may quote an error, a config value or a server's words passes through."""
    text = redact_text(text)
    for secret in _secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    return text


# Digit runs the phone pattern would take that are no phone: an IPv4 address (a listening address,
# a URL's host) and an ISO date (with its hour), which INFO logs must keep readable.
_NOT_A_PHONE = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}|\d{4}-\d{2}-\d{2}(?:[ T]\d{2})?")


def _phone(match: re.Match[str]) -> str:
    return match.group(0) if _NOT_A_PHONE.fullmatch(match.group(0)) else "<phone>"


def mask_pii(text: str) -> str:
    return _PHONE.sub(_phone, _EMAIL.sub("<email>", text))


def redact_secrets(_logger: Any, _method: str, event: EventDict) -> EventDict:
    return _scrub_event(event, mask_secrets)


class RedactUrls(logging.Filter):
    """Renders a library's record with its URLs redacted before any handler sees it: httpx logs the
    full request URL (userinfo, query, a webhook's path) at INFO, httpcore response headers at DEBUG."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            try:
                text = mask_secrets(record.getMessage())
            except Exception:  # args that do not fit the message: never print them raw
                text = f"{mask_secrets(record.msg)} (its arguments could not be rendered)"
            record.msg, record.args = text, ()
        return True


_URL_LOGGERS = ("httpx", *(f"httpcore.{name}" for name in ("connection", "http11", "http2", "proxy", "socks")))


def _filter_library_urls() -> None:
    for name in _URL_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactUrls) for f in logger.filters):
            logger.addFilter(RedactUrls())


_filter_library_urls()  # at import: a library's line may come before (or without) `configure`


def _redact_keys(mapping: Mapping[str, Any]) -> dict[str, Any]:
    """Each value under a PII key replaced, at any depth; structlog's private fields (`_record`) kept."""
    return {
        k: v if k.startswith("_") else "<redacted>" if k in _PII_KEYS and v is not None else _redact_nested(v)
        for k, v in mapping.items()
    }


def _redact_nested(value: Any) -> Any:
    if isinstance(value, dict):
        return _redact_keys(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_redact_nested(v) for v in value)
    return value


def redact_pii(_logger: Any, method: str, event: EventDict) -> EventDict:
    if method == "debug" or event.get("level") == "debug":
        return event
    return _redact_keys(_scrub_event(event, mask_pii))


def configure(level: str | int = "INFO", *, json: bool | None = None, stream: TextIO | None = None) -> None:
    """JSON lines when the stream is not a terminal (or `json=True`), readable console otherwise."""
    stream = stream or sys.stderr
    _filter_library_urls()
    if json is None:
        json = not stream.isatty()
    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.format_exc_info,
        redact_secrets,
        redact_pii,
    ]
    rendering: list[Processor] = (
        [structlog.processors.JSONRenderer()]
        if json
        else [inert_values, structlog.dev.ConsoleRenderer(colors=stream.isatty())]
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[structlog.stdlib.ExtraAdder(), *shared],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *rendering],
    )
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in list(root.handlers):
        if getattr(old, "_capture_sync", False):
            root.removeHandler(old)
    handler._capture_sync = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level if isinstance(level, int) else level.upper())
    structlog.configure(
        processors=[structlog.stdlib.filter_by_level, *shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )


def hand_to_stdlib() -> None:
    """For the Python API, which leaves logging to its host: our events go to the stdlib `logging`
    module (loggers `capture_sync.*`) through the same redaction, one line each
    (`event=run.finished kind=sync captured=3 ...`), and the host's handlers and levels decide what is
    shown. Done only while nothing has configured structlog: unconfigured, it prints every event,
    debug ones with contact data included, to stdout."""
    _filter_library_urls()
    if structlog.is_configured():
        return
    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            structlog.contextvars.merge_contextvars,
            structlog.processors.format_exc_info,
            redact_secrets,
            redact_pii,
            structlog.processors.LogfmtRenderer(key_order=["event"], drop_missing=True),
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )
