"""OpenTelemetry traces (the otel extra): the spans of a sync, by name and attribute, with nothing
secret or personal in them; exported over OTLP when OTEL_* say so; off (opentelemetry not even
imported) when they do not."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import connector
from connector import tracing
from connector.sandbox.app import error_response
from connector.sandbox.envelope import ApiError

ROWS = 30  # three batches of 10 (the test config's batch_size)


class FirstBulksRefused:
    """ASGI middleware: the first bulk request is answered 429 (Retry-After: 0), and the first one
    of another batch 503 retryable; each succeeds when retried with its same key."""

    def __init__(self, app: Any) -> None:
        self.app, self.faulted = app, {}  # idempotency key -> the status it met

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].endswith("/bulk"):
            key = dict(scope["headers"]).get(b"idempotency-key", b"").decode()
            if key not in self.faulted and len(self.faulted) < 2:
                self.faulted[key] = 429 if not self.faulted else 503
                error = (
                    ApiError(429, "rate_limited", "slow down", headers={"Retry-After": "0"})
                    if self.faulted[key] == 429
                    else ApiError(503, "capture_unavailable", "try again", retryable=True)
                )
                return await error_response(error)(scope, receive, send)
        await self.app(scope, receive, send)


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.use(provider)
    yield exporter
    tracing.use(None)


def _attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def test_the_spans_of_a_sync_with_a_429_and_a_retried_batch(
    kit, sandbox_factory, tmp_path: Path, spans: InMemorySpanExporter
) -> None:
    middleware: list[FirstBulksRefused] = []
    box = sandbox_factory(wrap=lambda app: middleware.append(FirstBulksRefused(app)) or middleware[0])
    key, secret = box.create_client("trace-test", rate_limit=100_000)
    kit.credentials(tmp_path, key, secret)
    csv = tmp_path / "contacts.csv"
    rows = [kit.contact(n, Phone=f"+1 415 555 {n:04d}") for n in range(1, ROWS + 1)]
    kit.contacts(csv, rows)
    config = kit.config(tmp_path, box.base_url, csv)

    report = connector.sync(config)

    assert report.captured == ROWS and sorted(middleware[0].faulted.values()) == [429, 503]
    finished = spans.get_finished_spans()
    by_name: dict[str, list[ReadableSpan]] = {}
    for span in finished:
        by_name.setdefault(span.name, []).append(span)
    [run] = by_name["capture_sync.run"]
    expected = {
        "capture_sync.integration": "capture-sync",
        "capture_sync.operation": "sync",
        "capture_sync.exit_code": 0,
        "capture_sync.read": ROWS,
        "capture_sync.captured": ROWS,
        "capture_sync.rejected": 0,
    }
    assert {k: _attrs(run).get(k) for k in expected} == expected
    [read] = by_name["capture_sync.source.read"]
    assert _attrs(read)["capture_sync.source"] == "signups" and _attrs(read)["capture_sync.records"] == ROWS
    assert read.parent is not None and read.parent.span_id == run.context.span_id

    requests = by_name["capture_api.request"]
    assert all(r.context.trace_id == run.context.trace_id for r in requests)
    bulk = [_attrs(r) for r in requests if _attrs(r)["capture_sync.operation"] == "capture_bulk"]
    assert len(bulk) == 3 and all(b["capture_sync.size"] == 10 and b["http.response.status_code"] == 200 for b in bulk)
    assert sorted((b["capture_sync.attempts"], b["capture_sync.rate_limited"]) for b in bulk) == [
        (1, 0),
        (2, 0),
        (2, 1),
    ]
    retried = next(
        r
        for r in requests
        if _attrs(r).get("capture_sync.attempts") == 2 and not _attrs(r)["capture_sync.rate_limited"]
    )
    assert [e.attributes["http.response.status_code"] for e in retried.events] == [503, 200]  # type: ignore[index]
    assert any(_attrs(r)["capture_sync.operation"] == "info" for r in requests)

    # Nothing secret or personal anywhere: not the key, the secret, an idempotency key, an email, a phone, a name.
    values = [
        str(v)
        for span in finished
        for v in [*_attrs(span).values(), *(a for e in span.events for a in (e.attributes or {}).values()), span.name]
    ]
    forbidden = [key, secret, box.base_url, *middleware[0].faulted]
    forbidden += [v for row in rows for k, v in row.items() if k != "id" and v]
    forbidden += ["".join(ch for ch in row["Phone"] if ch.isdigit()) for row in rows]
    leaks = [(f, v) for f in forbidden for v in values if f in v]
    assert leaks == []


class _Collector(BaseHTTPRequestHandler):
    received: list[bytes] = []

    def do_POST(self) -> None:
        self.received.append(self.rfile.read(int(self.headers["Content-Length"])))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def test_a_cli_sync_exports_its_spans_over_otlp_when_the_otel_variables_say_so(
    kit, sandbox_factory, tmp_path: Path
) -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    collector = ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    threading.Thread(target=collector.serve_forever, daemon=True).start()
    try:
        box = sandbox_factory()
        key, secret = box.create_client("otlp-test", rate_limit=100_000)
        kit.credentials(tmp_path, key, secret)
        csv = tmp_path / "contacts.csv"
        kit.contacts(csv, [kit.contact(n) for n in range(1, 4)])
        config = kit.config(tmp_path, box.base_url, csv)
        env = kit.env(
            OTEL_TRACES_EXPORTER="otlp",
            OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
            OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{collector.server_address[1]}",
            OTEL_SERVICE_NAME="crm-feed",
        )
        ran = kit.run("sync", "-c", str(config), "--json", env=env)
        assert ran.code == 0, ran.stderr
        assert json.loads(ran.stdout)["counts"]["captured"] == 3
    finally:
        collector.shutdown()
    names, services = set(), set()
    for body in _Collector.received:  # the batch processor flushes at exit: every span is in by then
        for resource_spans in ExportTraceServiceRequest.FromString(body).resource_spans:
            services |= {a.value.string_value for a in resource_spans.resource.attributes if a.key == "service.name"}
            names |= {s.name for scope in resource_spans.scope_spans for s in scope.spans}
    assert names == {"capture_sync.run", "capture_sync.source.read", "capture_api.request"} and services == {"crm-feed"}


def test_without_otel_variables_tracing_is_off_and_opentelemetry_is_not_imported(
    kit, sandbox_factory, tmp_path: Path
) -> None:
    box = sandbox_factory()
    key, secret = box.create_client("off-test", rate_limit=100_000)
    kit.credentials(tmp_path, key, secret)
    csv = tmp_path / "contacts.csv"
    kit.contacts(csv, [kit.contact(1)])
    config = kit.config(tmp_path, box.base_url, csv)
    probe = (
        "import sys, connector; r = connector.sync(sys.argv[1]); "
        "print(r.captured, sorted(m for m in sys.modules if m.startswith('opentelemetry')))"
    )
    env = {k: v for k, v in kit.env().items() if not k.startswith("OTEL_")}
    ran = subprocess.run(
        [sys.executable, "-c", probe, str(config)], capture_output=True, text=True, env=env, timeout=60
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "1 []"
