"""OpenTelemetry traces (the `otel` extra, docs/tracing.md): a span per run, per source read and per
Capture API request, exported over OTLP when the standard `OTEL_*` variables ask for it.

Off, it is free: nothing here imports opentelemetry until a span is first asked for, and then only
if `OTEL_TRACES_EXPORTER` (other than `none`) or an `OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT` is set and
`OTEL_SDK_DISABLED` is not `true`; otherwise every hook is a shared no-op context manager. A host
with its own tracer provider (the Python API inside an instrumented app) hands it over with `use()`.

What a span carries is counts, names and codes: the integration (the config file's stem), the source,
the operation, the size, the HTTP status, the attempt, the 429s, the exit code. Never a key (API
key or idempotency key), a secret, a URL, contact data or an error's text, which may quote a server
or a record: a failure is its exception's type name.

    capture_sync.run            capture_sync.integration, .operation (sync|replay), .exit_code, .read,
    │                           .captured, .rejected, .failed, .blocked, .unsettled, ...
    ├── capture_sync.source.read  capture_sync.source, .records, .rejected (status ERROR: failed or not read)
    └── capture_api.request     capture_sync.operation (info|capture_bulk|capture_person), .size (persons),
                                http.response.status_code, capture_sync.attempts, capture_sync.rate_limited (429s);
                                an `attempt` event per HTTP attempt (number, status)
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from . import logs

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer, TracerProvider

log = logs.get_logger("capture_sync.tracing")

_integration: ContextVar[str | None] = ContextVar("capture_sync_integration", default=None)
_request: ContextVar[_RequestTrace | None] = ContextVar("capture_sync_request", default=None)
_NOTHING: AbstractContextManager[None] = nullcontext()
_UNSET: Any = object()
_tracer: Tracer | None = _UNSET


class RunReport(Protocol):
    """What the spans read of a run's report (`delivery.RunReport`): named here, so that this leaf,
    which the engine and the API client import, imports nothing of theirs."""

    kind: str
    read: int
    rejected: int
    unsettled: int
    stopped: bool
    ended_by_error: str | None
    source_failures: dict[str, str]

    @property
    def exit_code(self) -> int: ...

    def counts(self) -> dict[str, int]: ...


@dataclass
class _RequestTrace:
    span: Span
    attempts: int = 0
    rate_limited: int = 0


def name_integration(name: str) -> None:
    """The integration the spans of this context belong to (the config file's stem): set where the
    API client for that config is made, so a run, its reads and its requests carry it."""
    _integration.set(name)


def use(provider: TracerProvider | None) -> None:
    """Trace with `provider` (a host's own, or a test's with an in-memory exporter); None: decide
    again from the environment at the next span."""
    global _tracer
    _tracer = _UNSET if provider is None else provider.get_tracer("capture_sync", _version())


def _version() -> str:
    import connector

    return str(connector.__version__)


def _get_tracer() -> Tracer | None:
    global _tracer
    if _tracer is _UNSET:
        _tracer = _from_environment()
    return _tracer


def _exporter_names() -> list[str]:
    """What the OTEL_* variables ask for: `OTEL_TRACES_EXPORTER` (comma-separated; `none` is off), or
    `otlp` when only an OTLP endpoint is given. Nothing: tracing is off (the SDK's default of `otlp`
    would send every CLI run's spans to localhost:4317 unasked)."""
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return []
    named = [n.strip() for n in os.environ.get("OTEL_TRACES_EXPORTER", "").split(",") if n.strip()]
    if named:
        return [] if named == ["none"] else [n for n in named if n != "none"]
    endpoints = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
    return ["otlp"] if any(os.environ.get(v, "").strip() for v in endpoints) else []


def _from_environment() -> Tracer | None:
    names = _exporter_names()
    if not names:
        return None
    try:
        from opentelemetry.sdk.resources import OTEL_SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        log.warning(
            "tracing.unavailable",
            exporters=names,
            why="OTEL_* variables ask for traces but the otel extra is not installed: pip install 'capture-sync[otel]'",
        )
        return None
    service = {} if os.environ.get(OTEL_SERVICE_NAME) else {"service.name": "capture-sync"}
    provider = TracerProvider(resource=Resource.create(service))  # OTEL_RESOURCE_ATTRIBUTES merge in
    for name in names:
        try:
            provider.add_span_processor(BatchSpanProcessor(_exporter(name)))
        except (ImportError, ValueError) as exc:
            log.warning("tracing.exporter_unavailable", exporter=name, why=str(exc))
    log.info("tracing.on", exporters=names)
    return provider.get_tracer("capture_sync", _version())


def _exporter(name: str) -> Any:
    """The span exporter `name` stands for in OTEL_TRACES_EXPORTER; `otlp` takes its protocol from
    OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL (grpc by default, as the spec says), and its endpoint,
    headers and TLS settings from the OTEL_EXPORTER_OTLP_* variables, which the exporter reads."""
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    if name != "otlp":
        raise ValueError(f"unknown exporter {name!r}: use otlp, console or none")
    protocol = (
        os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "grpc"
    )
    if protocol.strip() == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    elif protocol.strip() == "http/protobuf":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # type: ignore[assignment]
    else:
        raise ValueError(f"OTLP protocol {protocol!r}: use grpc or http/protobuf")
    return OTLPSpanExporter()


def _attributes(**values: Any) -> dict[str, Any]:
    integration = _integration.get()
    found = {f"capture_sync.{k}": v for k, v in values.items() if v is not None}
    return found if integration is None else {"capture_sync.integration": integration, **found}


def _failed(span: Span, why: str) -> None:
    from opentelemetry.trace import Status, StatusCode

    span.set_status(Status(StatusCode.ERROR, why))


def run(report: RunReport) -> AbstractContextManager[None]:
    """The span of one sync or replay; its counts and exit code are read from `report` at the end."""
    tracer = _get_tracer()
    return _NOTHING if tracer is None else _run(tracer, report)


@contextmanager
def _run(tracer: Tracer, report: RunReport) -> Iterator[None]:
    with tracer.start_as_current_span(
        "capture_sync.run",
        attributes=_attributes(operation=report.kind),
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            yield
        finally:
            code = int(report.exit_code)
            span.set_attributes(
                _attributes(
                    exit_code=code,
                    unsettled=report.unsettled,
                    stopped=report.stopped,
                    **report.counts(),
                )
            )
            if code:
                _failed(span, report.ended_by_error or f"exit {code}")


def source_read(name: str, report: RunReport) -> AbstractContextManager[None]:
    """The span of reading one source; the records it read are the report's growth meanwhile."""
    tracer = _get_tracer()
    return _NOTHING if tracer is None else _source_read(tracer, name, report)


@contextmanager
def _source_read(tracer: Tracer, name: str, report: RunReport) -> Iterator[None]:
    read, rejected = report.read, report.rejected
    with tracer.start_as_current_span(
        "capture_sync.source.read",
        attributes=_attributes(source=name),
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            yield
        except BaseException as exc:
            _failed(span, type(exc).__name__)
            raise
        finally:
            span.set_attributes(
                {"capture_sync.records": report.read - read, "capture_sync.rejected": report.rejected - rejected}
            )
            if name in report.source_failures:
                _failed(span, "the source failed mid-read")


def request(operation: str, size: int) -> AbstractContextManager[None]:
    """The span of one logical Capture API request, all its attempts (retries, 429s) included."""
    tracer = _get_tracer()
    return _NOTHING if tracer is None else _traced_request(tracer, operation, size)


@contextmanager
def _traced_request(tracer: Tracer, operation: str, size: int) -> Iterator[None]:
    with tracer.start_as_current_span(
        "capture_api.request",
        attributes=_attributes(operation=operation, size=size),
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        trace = _RequestTrace(span)
        token = _request.set(trace)
        try:
            yield
        except BaseException as exc:
            _failed(span, type(exc).__name__)  # the type only: a message may quote the server
            raise
        finally:
            _request.reset(token)
            span.set_attributes(
                {"capture_sync.attempts": trace.attempts, "capture_sync.rate_limited": trace.rate_limited}
            )


def attempted(number: int, status_code: int | None) -> None:
    """One HTTP attempt of the request in hand: counted on its span, and an `attempt` event."""
    trace = _request.get()
    if trace is None:
        return
    trace.attempts += 1
    trace.rate_limited += status_code == 429
    event: dict[str, Any] = {"capture_sync.attempt": number}
    if status_code is not None:
        event["http.response.status_code"] = status_code
        trace.span.set_attribute("http.response.status_code", status_code)
    trace.span.add_event("attempt", event)
