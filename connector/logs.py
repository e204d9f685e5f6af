"""Logging: structlog over the stdlib, so our events and every library's pass one redaction chain.

The API secret is masked everywhere, and every URL is shown as `connector.redact` renders it
(httpx's own "HTTP Request: POST <url>" lines included, by a filter on its loggers). Contact PII is
masked in every event below DEBUG: a debug session may see it, production logs at INFO never do.
Emails and phone numbers are found anywhere in the text; a name cannot be told from other words, so
it is masked by its key (`name`, `first_name`, `last_name`, at any depth: a person or a record
logged whole).

structlog itself loads at the first event, not at start-up: importing it loads its dev renderer's
rich tracebacks and pygments (tens of ms), which `status` or `ledger list` never use. `configure`
installs the handler at once and applies structlog's configuration the moment structlog is first
imported, by anyone (`_ConfigureOnImport`); modules take their logger from `get_logger`.
"""

from __future__ import annotations

import importlib.util
import logging
import re
import sys
from collections.abc import Callable, Mapping
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import TYPE_CHECKING, Any, TextIO, cast

from .redact import redact_text

if TYPE_CHECKING:
    from collections.abc import Sequence
    from importlib.abc import Loader

    from structlog.typing import EventDict, Processor

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
    if type(value) in (list, tuple):  # a named tuple (a ledger Member) takes the repr path below
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
# a URL's host), an ISO date (with its hour) and a decimal of at most 3 places (a window's length, a
# rate: `ratelimit.learned`), which INFO logs must keep readable. No phone ends in a group of 1-3
# digits after its only dot.
_NOT_A_PHONE = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}|\d{4}-\d{2}-\d{2}(?:[ T]\d{2})?|\d{1,5}\.\d{1,3}")


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
    if type(value) in (list, tuple):  # not a named tuple: its constructor takes its fields one by one
        return type(value)(_redact_nested(v) for v in value)
    return value


def redact_pii(_logger: Any, method: str, event: EventDict) -> EventDict:
    if method == "debug" or event.get("level") == "debug":
        return event
    return _redact_keys(_scrub_event(event, mask_pii))


def get_logger(name: str) -> Any:
    """structlog's logger `name`, as `structlog.get_logger(name)` would give it, but structlog is
    imported at this logger's first use, not here: a module imported at start-up logs for free.
    After `configure`, an event below its logger's level does not import structlog either (it would
    drop it: `filter_by_level` is the first processor), so a sync's debug events before its first
    request do not load structlog and rich's tracebacks ahead of it."""
    return _LazyLogger(name)


# structlog's stdlib methods and the level `filter_by_level` checks for each
_METHOD_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "warn": logging.WARNING,
    "error": logging.ERROR,
    "exception": logging.ERROR,
    "critical": logging.CRITICAL,
    "fatal": logging.CRITICAL,
}


def _dropped(*_args: Any, **_kw: Any) -> None:
    """An event below its logger's level, dropped as `filter_by_level` would drop it."""


class _LazyLogger:
    __slots__ = ("_logger", "_name", "_stdlib")

    def __init__(self, name: str) -> None:
        self._name = name
        self._logger: Any = None
        self._stdlib = logging.getLogger(name)  # what `filter_by_level` asks

    def isEnabledFor(self, level: int) -> bool:
        """Whether an event at `level` would pass, without importing structlog: a caller skips building
        a dropped event's fields on a hot path."""
        return self._stdlib.isEnabledFor(level)

    def __getattr__(self, attr: str) -> Any:
        if self._logger is None:
            level = _METHOD_LEVELS.get(attr)
            if (
                level is not None
                and _pending_structlog  # `configure` ran, structlog not imported yet
                and not self._stdlib.isEnabledFor(level)
            ):
                return _dropped
            import structlog

            self._logger = structlog.get_logger(self._name)
        return getattr(self._logger, attr)


def configure(level: str | int = "INFO", *, json: bool | None = None, stream: TextIO | None = None) -> None:
    """JSON lines when the stream is not a terminal (or `json=True`), readable console otherwise."""
    global _pending_structlog
    stream = stream or sys.stderr
    _filter_library_urls()
    if json is None:
        json = not stream.isatty()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(_FormatterOnFirstUse(json, colors=stream.isatty()))
    root = logging.getLogger()
    for old in list(root.handlers):
        if getattr(old, "_capture_sync", False):
            root.removeHandler(old)
    handler._capture_sync = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level if isinstance(level, int) else level.upper())
    _pending_structlog = True
    if "structlog" in sys.modules:
        _configure_structlog()
    elif _ON_IMPORT not in sys.meta_path:
        sys.meta_path.insert(0, _ON_IMPORT)


def _shared() -> list[Processor]:
    """The processors every event passes, ours and a library's (stdlib) alike."""
    import structlog

    return [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.format_exc_info,
        redact_secrets,
        redact_pii,
    ]


class _FormatterOnFirstUse(logging.Formatter):
    """structlog's ProcessorFormatter (JSON, or the console renderer), built at the first record."""

    def __init__(self, json: bool, *, colors: bool) -> None:
        super().__init__()
        self._json, self._colors = json, colors
        self._real: logging.Formatter | None = None

    def format(self, record: logging.LogRecord) -> str:
        if self._real is None:
            import structlog

            rendering: list[Processor] = (
                [structlog.processors.JSONRenderer()]
                if self._json
                else [inert_values, structlog.dev.ConsoleRenderer(colors=self._colors)]
            )
            self._real = structlog.stdlib.ProcessorFormatter(
                foreign_pre_chain=[structlog.stdlib.ExtraAdder(), *_shared()],
                processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *rendering],
            )
        return self._real.format(record)


_pending_structlog = False  # `configure` ran while structlog was not imported yet


def _configure_structlog() -> None:
    global _pending_structlog
    _pending_structlog = False
    import structlog

    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *_shared(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )


class _ConfigureOnImport:
    """A meta path finder for `structlog` alone: its module loads as usual, and as soon as it has run,
    before the import returns to whoever asked, the configuration `configure` left pending is applied.
    So no event, from any module or plugin, ever meets an unconfigured structlog."""

    def find_spec(
        self, name: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if name != "structlog" or not _pending_structlog:
            return None
        sys.meta_path.remove(self)  # the other finders find it; this one is done
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            spec.loader = cast("Loader", _ThenConfigure(spec.loader))
        return spec


class _ThenConfigure:
    def __init__(self, loader: Any) -> None:
        self._loader = loader

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        module: ModuleType | None = self._loader.create_module(spec)
        return module

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        module.__loader__ = self._loader  # as if it had loaded alone
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        if _pending_structlog:
            _configure_structlog()

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._loader, attr)


_ON_IMPORT = _ConfigureOnImport()


def hand_to_stdlib() -> None:
    """For the Python API, which leaves logging to its host: our events go to the stdlib `logging`
    module (loggers `capture_sync.*`) through the same redaction, one line each
    (`event=run.finished kind=sync captured=3 ...`), and the host's handlers and levels decide what is
    shown. Done only while nothing has configured structlog: unconfigured, it prints every event,
    debug ones with contact data included, to stdout."""
    import structlog

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
